"""The RULES table: one row per cause, in precedence order. Data only; `engine.decide` reads it.

A row names the stages the cause can explain, the conditions that must all hold (`needs`), conditions of which
at least one must hold (`any_of`), and the lever to pull. A condition compares one signal with a fixed threshold
and, where `vs_baseline` is set, also with that signal's own healthy baseline (value ≥ factor × baseline; a
baseline of 0 counts as "above" for any value over the threshold). A condition whose signal is not available
never holds, unless it has `alternatives`: then the first of them whose signal is available decides (a guard an
engine cannot read is read another way, or the row names `unknown` with what is missing; it never passes
silently). An `optional` condition (supporting evidence) is checked only where available and is never reported
missing. Precedence: the first row whose stage matches and whose conditions hold wins; a restart or a sick GPU
explains every symptom after it, so they come first; long prompts before KV pressure (longer prompts hold more KV
blocks); capacity last before network, because queues are what every other cause ends in too.

The measurements behind each threshold are in docs/diagnosis-history.md; the signals are defined in
docs/diagnosis-rules.md (sloguard.diagnose.signals computes them; sources.engines.capabilities says which
engine has which).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from sloguard.diagnose.model import Cause

Op = Literal[">=", "<=", ">", "<"]


@dataclass(frozen=True, slots=True)
class Condition:
    """`signal op threshold`, and (vs_baseline) value ≥ vs_baseline × its healthy baseline (op < or <=: below it).

    A threshold of inf with op < asks only "has not risen to vs_baseline × its baseline"; with no baseline learned
    yet such a condition holds (nothing shows the signal rose). `floor` (op < or <= only) raises that bound to at
    least `floor`. `alternatives`: conditions that decide in its place, in order, when its signal is not available.
    """

    signal: str
    op: Op
    threshold: float
    vs_baseline: float | None = None
    optional: bool = False
    floor: float = 0.0
    alternatives: tuple[Condition, ...] = ()


@dataclass(frozen=True)
class CauseRule:
    """One cause: stages it explains, conditions, the lever; rows are in precedence order."""

    cause: Cause
    stages: frozenset[str]
    needs: tuple[Condition, ...] = ()
    any_of: tuple[Condition, ...] = ()
    lever: str = ""  # the short, specific action (the verdict line)
    detail: str = ""  # why, and what else to check (evidence, README)
    unlocated: bool = False  # also explains a breach no stage explains (engine.candidates)
    # Its conditions are a state of the engine or of its load, not of the breach (unlocated rows are too): they
    # count toward confirmation at every evaluation, breach or not (engine.holding, confirm.Confirmer).
    state: bool = False
    # Its evidence is an event that happened (a restart), not a level at a threshold: it cannot flicker, so it is
    # named at the evaluation that first shows it (confirm.Confirmer), where a level waits for 2 of 3.
    event: bool = False
    # Its level is far past healthy noise: like an event, named at the evaluation that first shows it.
    sure: bool = False


ALL = frozenset({"network", "queue", "prefill", "decode"})
ENGINE = frozenset({"queue", "prefill", "decode"})
C = Condition

# Thresholds, each with its one-line reason (history: docs/diagnosis-history.md).
PROMPT_SHIFT = 2.0  # the users' mean prompt doubled: a shift of the mix, not a burst of a few long ones
PROMPT_P90_SHIFT = 1.5  # a 1-2-5 bucketed p90 moves within a bucket: 2x could not show before the next bucket filled
PROMPT_SURE = 2.5  # with room in the KV cache, a mean this far up is past healthy noise on its own
PROMPT_CERTAIN = 3.0  # a mean 3x up is no burst (healthy runs read 3.2x once in 0.04% of evaluations)
KV_FULL = 0.85  # a cache this full admits requests only as blocks free
KV_HALF = 0.5  # with preemptions, a cache at least half full at a recent scrape ran out between scrapes
KV_WINDOW_LOW = 0.4  # ... or this full at a tenth of the window's scrapes
KV_SHARE_UP, KV_SHARE_FAR = 5.0, 10.0  # the same traffic filling this many times its usual share: a smaller cache
WAITING = 1.0  # at least one request waiting on average over the recent quarter
RISE = 2.0  # a level at twice its healthy baseline (waiting requests, preemptions)
QUEUE_TIME_UP = 3.0  # the engine's own queue time 3x its healthy mean
ARRIVALS_SD = 2.0  # the users' arrivals 2 Poisson sd over their healthy rate: more demand
ARRIVALS_SURGE_SD = 4.0  # ... this far over it alone is a surge
ARRIVALS_BATCH_SD = 3.0  # a batch grown far more than arrivals needs arrivals up at least this much
OUTPUT_UP = 1.25  # tokens generated per second up a quarter: more demand served (no request counter)
OUTPUT_SURGE = 2.0  # tokens served per second doubled: a surge, where the engine counts no arrivals
ENGINE_SLOWER = 1.5  # the engine's own seconds per generated token up by half: its compute slowed
REQUEST_RATE_UP = 1.5  # the engine's total arrivals over the window up by half
BATCH_GREW = 2.5  # the batch 2.5x its baseline (and at least BATCH_MIN requests): saturating under load
BATCH_MIN = 2.0  # below two requests a batch that tripled is one long request, not a grown batch
BATCH_SAME_UP = 1.5  # "the batch has not grown": under 1.5x its baseline
BATCH_KEPT = 0.75  # "the batch has not shrunk": at least 0.75x its baseline
SERVING_CPU = 0.35  # a serving process (HTTP front, scheduler) using a third of a core or more
SERVING_CPU_UP = 3.0  # ... and three times its healthy use
SERVING_DEMAND = 1.0  # a serving process running or waiting for a core a whole core's worth: pinned, starved or not
CPU_WAIT = 0.2  # a CPU engine's threads waiting for a core a fifth of the time: a neighbour takes its cores
CPU_WAIT_UP = 3.0  # ... and three times its healthy wait
CPU_NOT_BUSIER = 1.5  # ... while its own CPU use is under 1.5x its healthy use (it got no more work)
GPU_CLOCK_LOW = 0.9  # SM clock under 90% of its max while a throttle reason holds

# Guards shared by rows: each reads its signal, or an alternative where the engine lacks it, never nothing.
PROMPTS_SAME = C("prompt_tokens_recent", "<", math.inf, vs_baseline=PROMPT_SHIFT,
                 alternatives=(C("prompt_tokens_per_request", "<", math.inf, vs_baseline=PROMPT_SHIFT),
                               C("prompt_tokens_per_output_token", "<", math.inf, vs_baseline=PROMPT_SHIFT)))
ARRIVALS_UP = C("arrival_surge_z", ">=", ARRIVALS_SD,
                alternatives=(C("output_tokens_per_second", ">", 0.0, vs_baseline=OUTPUT_UP),))
BATCH_HELD = C("requests_running", ">=", 0.0, vs_baseline=BATCH_KEPT, optional=True)
BATCH_SAME = C("requests_running", "<", math.inf, vs_baseline=BATCH_SAME_UP, floor=BATCH_MIN)
ARRIVALS_CALM = C("arrival_surge_z", "<", ARRIVALS_SD, optional=True)
GPU_BACKED = C("engine_gpu_backed", ">=", 1.0)  # a serving process's CPU is a cause only beside a GPU's compute
CPU_BUILD = C("engine_gpu_backed", "<", 1.0)
# A CPU engine that waits for a core while doing no more work than usual was starved by a neighbour; one that got
# busier (more load, longer prompts) waits behind its own threads, and those rows name it.
NOT_BUSIER = C("serving_cpu_cores", "<", math.inf, vs_baseline=CPU_NOT_BUSIER)
PROMPTS_LONGER = (C("prompt_tokens_per_request", ">", 0.0, vs_baseline=PROMPT_CERTAIN),
                  C("prompt_tokens_recent", ">", 0.0, vs_baseline=PROMPT_CERTAIN, optional=True),
                  C("prompt_tokens_per_output_token", ">", 0.0, vs_baseline=PROMPT_CERTAIN, optional=True))
KV_LEVER = "raise KV blocks or lower max-num-seqs"
KV_FIX = ("raise gpu-memory-utilization, shorten max-model-len, quantise the KV cache, or admit fewer sequences; "
          "the requests it holds back time out without stages, so it also names a breach no single stage explains")
PROMPT_LEVER = "enable chunked prefill and prefix caching"
PROMPT_FIX = ("bound max-num-batched-tokens, cache shared prefixes, or route long prompts to their own replicas; it "
              "stalls every stage, so it also names a breach no single stage explains")
CAPACITY_LEVER = "add replicas or lower max concurrency"
NETWORK_LEVER = "check the gateway and the network path"

RULES: tuple[CauseRule, ...] = (
    # One or a few replicas carry the excess (diagnose/replicas.py): first, so the rows below do not name it.
    CauseRule("replica_outlier", ALL, needs=(C("replica_outliers", ">=", 1),), sure=True, unlocated=True,
              lever="drain the named replica, or fix the routing imbalance that loads it",
              detail="one or a few replicas are much slower, fuller or restarting while the others are healthy: "
                     "a sick node or GPU, or a router sending them more: drain or replace the replica, check its "
                     "node and GPU, and the router's balance"),
    # An event: named at first sight; it explains every symptom after it.
    CauseRule("engine_restart", ALL, any_of=(C("engine_restarts", ">=", 1), C("cold_starts", ">=", 1, optional=True),
                                             C("processes_down", ">=", 1, optional=True)),
              event=True, unlocated=True,
              lever="find why it restarted (crash, OOM) and gate readiness on warm-up",
              detail="a restart resets the engine's counters and its cold start recompiles graphs and refills "
                     "caches (a watched process gone is one under way): check the engine log for the crash or OOM, "
                     "and keep a warm spare replica; the requests it cut short have no stages, so it also names a "
                     "breach no stage explains"),
    CauseRule("gpu_unhealthy", ENGINE, unlocated=True,
              any_of=(C("gpu_health_problems", ">=", 1), C("canary_degraded", ">=", 1, optional=True)),
              lever="drain the node and reset or replace the GPU",
              detail="the GPU reports faults (row remap, XID, uncorrectable ECC, PCIe link below max, canary "
                     "degraded): route traffic to healthy replicas; it slows every step, so it also names a "
                     "breach no single stage explains"),
    CauseRule("gpu_throttled", ENGINE, unlocated=True,
              needs=(C("gpu_throttle_reasons", ">=", 1), C("gpu_sm_clock_ratio", "<=", GPU_CLOCK_LOW, optional=True)),
              lever="check cooling and power: the GPU clocks are held down",
              detail="power cap or thermal slowdown: check fans, inlet temperature, power limits and node power "
                     "capping; every step is slower, so requests also queue behind them and it also names a "
                     "breach no single stage explains"),
    # The mean and the p90 both up, with room in the cache (a full cache over-samples long prefills).
    CauseRule("long_prompts", ENGINE, state=True, unlocated=True,
              needs=(C("prompt_tokens_per_request", ">", 0.0, vs_baseline=PROMPT_SHIFT),
                     C("prompt_tokens_p90", ">", 0.0, vs_baseline=PROMPT_P90_SHIFT, optional=True),
                     C("kv_cache_usage_p90", "<", KV_FULL, optional=True)),
              lever=PROMPT_LEVER,
              detail="prompts got longer, so prefill steps are longer and stall other requests' queueing and "
                     "decoding: " + PROMPT_FIX),
    # The mean alone at 2.5x, with room in the cache.
    CauseRule("long_prompts", ENGINE, sure=True, unlocated=True,
              needs=(C("kv_cache_usage_p90", "<", KV_FULL, optional=True),),
              any_of=(C("prompt_tokens_per_request", ">", 0.0, vs_baseline=PROMPT_SURE),
                      C("prompt_tokens_recent", ">", 0.0, vs_baseline=PROMPT_SURE, optional=True)),
              lever=PROMPT_LEVER, detail="prompts got much longer, with room in the KV cache: " + PROMPT_FIX),
    # The mean at 3x (or the prompts' share of the tokens, where the engine counts no requests).
    CauseRule("long_prompts", ENGINE, sure=True, unlocated=True, any_of=PROMPTS_LONGER,
              lever=PROMPT_LEVER,
              detail="prompts got much longer (the mean alone: the p90 of requests finishing falls while long "
                     "prefills jam the engine): " + PROMPT_FIX),
    CauseRule("kv_cache_pressure", ENGINE, unlocated=True,
              needs=(C("kv_cache_usage_p90", ">=", KV_FULL),),
              any_of=(C("preemptions_per_second", ">", 0.0, vs_baseline=RISE),
                      C("requests_waiting", ">=", WAITING, vs_baseline=RISE)),
              lever=KV_LEVER, detail="the KV cache is full: new requests wait for blocks and running ones are "
                                     "preempted and recomputed; " + KV_FIX),
    # Preemptions are the engine's own word that the cache ran out.
    CauseRule("kv_cache_pressure", ENGINE, unlocated=True,
              needs=(C("preemptions_per_second", ">", 0.0, vs_baseline=RISE),),
              any_of=(C("kv_cache_usage_peak", ">=", KV_HALF), C("kv_cache_usage_p90", ">=", KV_WINDOW_LOW)),
              lever=KV_LEVER, detail="the KV cache ran out (preemptions, and a cache at least half full "
                                     "recently): " + KV_FIX),
    # Requests held back while the batch has not grown: the engine admits less, not more demand.
    CauseRule("kv_cache_pressure", ENGINE, unlocated=True,
              needs=(C("kv_cache_usage_peak", ">=", KV_HALF, vs_baseline=RISE), BATCH_SAME, ARRIVALS_CALM,
                     PROMPTS_SAME),
              any_of=(C("requests_waiting_peak", ">=", WAITING, vs_baseline=RISE),
                      C("queue_seconds_per_second", ">", 0.0, vs_baseline=QUEUE_TIME_UP, optional=True)),
              lever=KV_LEVER, detail="requests wait for KV blocks with the batch no bigger than usual and no more "
                                     "load: the cache is too small for the requests it is given; " + KV_FIX),
    CauseRule("kv_cache_pressure", ENGINE, unlocated=True,
              needs=(C("preemptions_per_second", ">", 0.0, vs_baseline=RISE),
                     C("kv_cache_usage_p90", ">=", 0.1, vs_baseline=KV_SHARE_UP), BATCH_SAME, ARRIVALS_CALM,
                     PROMPTS_SAME),
              lever=KV_LEVER,
              detail="the KV cache ran out while the same traffic fills five times its usual share of it: the cache "
                     "is smaller than it was; check the engine's gpu-memory-utilization and what else holds GPU "
                     "memory, then raise KV blocks or admit fewer sequences"),
    CauseRule("kv_cache_pressure", ENGINE, unlocated=True,
              needs=(C("kv_cache_usage_peak", ">=", KV_HALF, vs_baseline=KV_SHARE_FAR), BATCH_SAME, ARRIVALS_CALM,
                     PROMPTS_SAME),
              lever=KV_LEVER,
              detail="the same traffic fills ten times its usual share of the KV cache, half of it or more: the "
                     "cache is smaller than it was and requests wait for blocks; check the engine's "
                     "gpu-memory-utilization and what else holds GPU memory, then raise KV blocks or admit fewer "
                     "sequences"),
    # A GPU engine's serving process pinned on CPU slows every stage a little.
    CauseRule("serving_cpu_bound", ALL, unlocated=True,
              needs=(GPU_BACKED, C("serving_cpu_cores", ">=", SERVING_CPU, vs_baseline=SERVING_CPU_UP)),
              lever="move tokenisation off the hot path or give the server more CPU",
              detail="a serving process is pinned on CPU: more API-server processes, a faster tokenizer, detokenise "
                     "off the event loop, check for busy neighbours on the host; it slows every stage, so it also "
                     "names a breach no single stage explains"),
    # ... and on a starved host, where it cannot get a third of a core: asking 3x its usual CPU while the users'
    # arrivals and prompts are as usual (more of them tokenise more: the capacity and prompt rows name those).
    CauseRule("serving_cpu_bound", ALL, unlocated=True,
              needs=(GPU_BACKED, C("serving_cpu_demand", ">=", SERVING_DEMAND, vs_baseline=SERVING_CPU_UP),
                     C("serving_cpu_wait", ">=", CPU_WAIT, vs_baseline=CPU_WAIT_UP), ARRIVALS_CALM, PROMPTS_SAME),
              lever="move tokenisation off the hot path or give the server more CPU",
              detail="a serving process asks a core's worth of CPU and waits for it (run-queue wait): the host's "
                     "cores are taken; give the server dedicated cores or move the busy neighbours, and take "
                     "tokenisation off its hot path; it slows every stage, so it also names a breach no single "
                     "stage explains"),
    # A CPU engine's CPU is its compute: it is starved when its threads wait for a core, not when it is busy.
    CauseRule("serving_cpu_bound", ALL, unlocated=True,
              needs=(CPU_BUILD, C("serving_cpu_wait", ">=", CPU_WAIT, vs_baseline=CPU_WAIT_UP), NOT_BUSIER),
              lever="give the engine its own cores: a neighbour takes the CPU its model runs on",
              detail="the engine computes on the CPU and its threads wait for a core (run-queue wait): pin it to "
                     "dedicated cores (cpuset, taskset), move the busy neighbour, or lower the engine's --threads "
                     "to the cores it really has; every step is slower, so it also names a breach no single stage "
                     "explains"),
    # A queue is capacity's only as more demand, the batch not shrunk and the prompts the same.
    CauseRule("capacity", frozenset({"queue", "decode"}), state=True,
              needs=(PROMPTS_SAME, ARRIVALS_UP, BATCH_HELD),
              any_of=(C("requests_waiting", ">=", WAITING, vs_baseline=RISE),
                      C("requests_waiting_capacity", ">=", WAITING, vs_baseline=RISE),
                      C("request_rate", ">", 0.0, vs_baseline=REQUEST_RATE_UP),
                      C("arrival_surge_z", ">=", ARRIVALS_SURGE_SD, optional=True)),
              lever=CAPACITY_LEVER,
              detail="more load than the engine can serve: requests wait for a slot or share bigger batches; scale "
                     "out or shed/limit load at the gateway"),
    # A batch grown far more than the arrivals: the engine saturating under more load.
    CauseRule("capacity", ENGINE, state=True, unlocated=True,
              needs=(C("requests_running", ">=", BATCH_MIN, vs_baseline=BATCH_GREW),
                     C("arrival_surge_z", ">=", ARRIVALS_BATCH_SD,
                       alternatives=(C("output_tokens_per_second", ">", 0.0, vs_baseline=OUTPUT_SURGE),)),
                     PROMPTS_SAME),
              lever=CAPACITY_LEVER,
              detail="more load than the engine serves at its usual speed: the batch grew far more than the "
                     "arrivals, so every request shares bigger steps; scale out or shed/limit load at the gateway; "
                     "it slows every stage, so it also names a breach no single stage explains"),
    CauseRule("network", frozenset({"network"}), needs=(C("network_measured", ">=", 1.0),),
              lever=NETWORK_LEVER,
              detail="the time is spent outside the server's own record of the request: load balancer, gateway, "
                     "TLS termination, proxies, cross-zone hops between clients and the server"),
    # An engine that sends its head at slot start (llama.cpp): the probes' "queue" is head − handshake, all the time
    # before a slot took the request; grown while the engine held none waiting at any recent scrape, it was spent
    # on the way to the engine (a gateway, a proxy, the path), not in its queue; the engine's own work is the same
    # (prompts, tokens served, its seconds per token), which longer prompts, more load or a starved CPU all change.
    CauseRule("network", frozenset({"queue"}),
              needs=(C("queue_from_head", ">=", 1.0), C("requests_waiting_peak", "<", WAITING), PROMPTS_SAME,
                     C("output_tokens_per_second", "<", math.inf, vs_baseline=OUTPUT_UP),
                     C("engine_token_seconds", "<", math.inf, vs_baseline=ENGINE_SLOWER)),
              lever=NETWORK_LEVER,
              detail="the time before the engine took the request grew while the engine queued none: it was spent "
                     "between the client and the engine (load balancer, gateway, proxies, the network path)"),
    # Without a server record the head also holds the server's HTTP front: network only with a calm CPU, no queue.
    CauseRule("network", frozenset({"network"}),
              needs=(C("network_measured", "<", 1.0), C("serving_cpu_cores", "<", SERVING_CPU),
                     C("requests_waiting", "<", WAITING)),
              lever=NETWORK_LEVER,
              detail="the time is spent before the server answers: load balancer, gateway, TLS termination, proxies, "
                     "cross-zone hops between clients and the server"),
)
