"""The incident acceptance checks, shared by the rigs of tests/incidents/ (each rig runs in its own test file)."""

from __future__ import annotations

import html as html_lib
import itertools
import re
import time
from collections import Counter
from datetime import datetime
from typing import Any

from sloguard.incident.text import burn_text, headline
from support.incident_rig import BURN, EVAL_S, GROUP_WAIT_S, SCRAPE_S, Rig
from support.procs import metric_value


def _text(page: str) -> str:
    page = re.sub(r"<style>.*?</style>|<title>.*?</title>", " ", page, flags=re.S)
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def _views(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s["incident"] for s in doc["slos"]}


def surfaces_agree(capture: dict[str, Any]) -> None:
    """Every surface shows, for each SLO, an evaluation the API served while it was read: state, severity, lead
    burn/budget, why and breaches alike; `sloguard status --json` the very view of its `evaluated_at`."""
    page, terminal, metrics = _text(capture["page"]), capture["terminal"], capture["metrics"]
    for s in capture["cli"]["slos"]:
        served = capture["seen"][s["name"]]
        assert s["evaluated_at"] not in served or served[s["evaluated_at"]] == s["incident"], \
            f"{s['name']}: sloguard status --json and /api/v1/slos differ on one evaluation"
        assert s["incident"] in served.values(), f"{s['name']}: the CLI shows an evaluation the API never served"
    for name, served in capture["seen"].items():
        views = list(served.values())
        shown = {"/metrics": [_metrics_show(metrics, name, v) for v in views],
                 "the terminal": [_text_shows(terminal, v, board=None) for v in views],
                 "the status page": [_text_shows(page, v, board=name) for v in views]}
        for surface, matches in shown.items():
            assert any(matches), f"{name}: {surface} shows none of the evaluations served {views}"


def _metrics_show(metrics: str, name: str, v: dict[str, Any]) -> bool:
    labels = {"slo": name, "state": v["state"], "severity": v["severity"] or "none"}
    return metric_value(metrics, "sloguard_slo_state", labels) == 1.0


def _text_shows(text: str, v: dict[str, Any], board: str | None) -> bool:
    if board is None and headline(v) not in text:
        return False
    badge = f"{v['severity'].upper()} · {v['state']}" if v["severity"] else v["state"]
    if board is not None and f"{badge} {board}" not in text:
        return False
    phrases = [burn_text(s, v["slo_window"]) for s in v["slis"]] + [v["why"]["text"]]
    return all(p in text for p in phrases + [b["text"] for b in v["breaches"]])


def healthy_is_quiet(rig: Rig, name: str, strict: bool = True) -> None:
    """The healthy SLO: no alert, no message; `strict`: OK on every surface at every capture too."""
    for cap in (rig.before, rig.during, rig.after):
        v = _views(cap["api"])[name]
        assert not v["severity"], v
        if strict:
            assert v["state"] == "OK" and not v["breaches"], v
            assert f"BREACH {name}" not in _text(cap["page"]) and f"{name}: BREACH" not in cap["terminal"]
    assert not rig.records[name].alerts_fired
    assert not [m for m in rig.slack.posted() if f" SLO {name} " in str(m.get("text"))]
    assert not [n for n in rig._am_notes() if any(a["labels"].get("slo") == name for a in n["json"]["alerts"])]


def faults_page_and_are_named(rig: Rig) -> None:
    for name, rec in rig.records.items():
        f = rec.fault
        if not f.payload:
            continue
        early = [m.get("text") for m in rig.slack.posted()
                 if f" SLO {name} " in str(m.get("text")) and float(m["at"]) < rec.injected]
        assert not early, f"{name}: paged before its fault: {early}"
        pages = {sli for sli, sev in rec.alerts_fired if sev == "page"}
        assert rec.paged is not None and (f.sli in pages if f.sli else pages), f"{name}: no {f.sli or ''} page"
        assert rec.paged >= rec.injected, f"{name}: its page fired {rec.injected - rec.paged:.0f} s before its fault"
        assert rec.verdict is not None, (f"{name}: {f.cause} never named (named: {rec.causes_seen}); "
                                         f"it said, in turn: {rec.whys[-8:]}")
        if f.cause == "failures":
            assert rec.verdict_text.startswith("failures over "), rec.verdict_text
        elif f.cause is not None:
            assert f"{f.cause}:" in rec.verdict_text or rec.verdict_text.endswith(f.cause), rec.verdict_text


def one_page_one_ticket(rig: Rig) -> None:
    """One page and one ticket per SLO/SLI each time its rows held: in the daemon, in Slack, from Alertmanager.

    A second firing is right only where the SLO's own stored requests held the rows again after the first ended
    (a loaded runner can keep a cured simulator over objectives calibrated minutes before); each is judged so.
    """
    firing = Counter(_burn_key(m["text"]) for m in rig.slack.posted()
                     if " budget burning" in str(m.get("text")) and str(m["text"]).startswith(("PAGE: ", "TICKET: ")))
    assert firing, firing
    for key, sent in firing.items():  # the daemon: once per firing it recorded, a second time only on bad requests
        _judge_refirings(rig, key, sent, _daemon_episodes(rig, key), "the daemon")
    am = Counter((a["labels"]["slo"], a["labels"]["sli"], a["labels"]["severity"]) for n in rig._am_notes()
                 for a in n["json"]["alerts"] if a["status"] == "firing" and a["labels"].get("alertname") == BURN
                 and n["json"]["status"] == "firing")
    assert am, am
    for key, sent in am.items():  # once per time Prometheus fired it, and a second time only on bad requests
        _judge_refirings(rig, key, sent, rig.prom_episodes(key), "Prometheus")
    # A ticket is held while its page fires: Alertmanager sends no firing ticket between the page's firing
    # notification and the page's end as Prometheus resolved it (its endsAt, not the resolved notification: that
    # waits for the page group's next flush, up to group_interval later, while the inhibition already ended); a
    # ticket before the page is an escalation, not a duplicate.
    for slo, sli in {(s, i) for s, i, _ in am}:
        for paged in _am_sent(rig, (slo, sli, "page"), "firing"):
            cleared = min((t for t in _am_ended(rig, (slo, sli, "page")) if t > paged), default=float("inf"))
            tickets = [t for t in _am_sent(rig, (slo, sli, "ticket"), "firing") if paged < t < cleared]
            assert not tickets, (slo, sli, "a ticket sent while its page fired", _am_timeline(rig, slo, sli))


def _burn_key(text: str) -> tuple[str, str, str]:
    """Return (slo, sli, severity) of a burn message: `PAGE: SLO <slo> <sli> budget burning ...`."""
    kind, rest = text.split(": SLO ", 1)
    slo, sli = rest.split(" budget burning")[0].rsplit(" ", 1)
    return slo, sli, kind.lower()


def _judge_refirings(rig: Rig, key: tuple[str, str, str], sent: int, episodes: list[tuple[float, float]],
                     who: str) -> None:
    """Each message is one firing (start, end) of `who`; each firing after the first had its rows hold again."""
    assert sent <= max(len(episodes), 1), (key, f"sent {sent} times, {who} fired it {len(episodes)}", episodes)
    for (_, ended), (again, _) in itertools.pairwise(episodes):
        held = rig.held(key, ended, again + REFIRE_LAG_S)
        assert held is not None, (key, f"{who} fired it again {again - ended:.0f} s after it ended while its rows "
                                  "never held on the SLO's requests", episodes, rig._bad_since(ended))


def _daemon_episodes(rig: Rig, key: tuple[str, str, str]) -> list[tuple[float, float]]:
    """Return each firing of the daemon's burn alert `key` from its delivery record: (fired_at, resolved).

    A resolved delivery is queued at most group_wait + one evaluation after the alert resolved: its end is put
    that much earlier, where the rows had not held for the hold already (the scan for a re-firing starts there).
    """
    mine = sorted((d for d in rig.deliveries if (d["group_labels"].get("slo"), d["group_labels"].get("sli"),
                                                 d["group_labels"].get("severity")) == key),
                  key=lambda d: d["created_at"])
    episodes: list[tuple[float, float]] = []
    for d in mine:
        if d["status"] == "firing" and d.get("fired_at") and (not episodes or episodes[-1][1] != float("inf")):
            episodes.append((float(d["fired_at"]), float("inf")))
        elif d["status"] == "resolved" and episodes and episodes[-1][1] == float("inf"):
            episodes[-1] = (episodes[-1][0], d["created_at"] - GROUP_WAIT_S - EVAL_S)
    return episodes


# A request counts from its start; it is stored when it ends (probe timeout 1.9 s), scraped within SCRAPE_S and
# the rule evaluated within 1 s more: rows that held on the store up to this long after a firing explain it
REFIRE_LAG_S = 2.0 + SCRAPE_S + 1.0
MARGINAL_S = 60.0  # one short window: a page whose rows held for less is at the edge of its row


def _am_ended(rig: Rig, key: tuple[str, str, str]) -> list[float]:
    """Return when the burn alert (slo, sli, severity) ended, as Prometheus resolved it (endsAt of a resolved alert)."""
    return [datetime.fromisoformat(a["endsAt"]).timestamp() for n in rig._am_notes() for a in n["json"]["alerts"]
            if a["status"] == "resolved" and a["labels"].get("alertname") == BURN
            and (a["labels"]["slo"], a["labels"]["sli"], a["labels"]["severity"]) == key]


def _am_timeline(rig: Rig, slo: str, sli: str) -> list[tuple[float, str, str, str, str]]:
    """Return Alertmanager's notifications of an SLO/SLI's burn alerts: (received, severity, status, starts, ends)."""
    return [(round(n["at"], 1), a["labels"]["severity"], a["status"], a["startsAt"], a["endsAt"])
            for n in rig._am_notes() for a in n["json"]["alerts"] if a["labels"].get("alertname") == BURN
            and (a["labels"]["slo"], a["labels"]["sli"]) == (slo, sli)]


def _am_sent(rig: Rig, key: tuple[str, str, str], status: str) -> list[float]:
    """Return when Alertmanager sent the burn alert (slo, sli, severity) with this status."""
    return [n["at"] for n in rig._am_notes() for a in n["json"]["alerts"]
            if a["status"] == status and a["labels"].get("alertname") == BURN
            and (a["labels"]["slo"], a["labels"]["sli"], a["labels"]["severity"]) == key]


def pages_reach_slack_in_time(rig: Rig) -> dict[str, float]:
    """Each page queued at the first evaluation past group_wait, in Slack while it was sent; resolved after the cure.

    Judged on the daemon's own record (/debug/alerts: when each delivery was queued, tried and acknowledged) and
    its evaluation times, not on a wall-clock allowance: a loaded runner delayed one page's HTTP delivery by 17 s.
    """
    delays = {}
    for name, rec in rig.records.items():
        if rec.paged is None:
            continue
        pages = [d for d in rig.deliveries if d["group_labels"].get("slo") == name and d["status"] == "firing"
                 and d["group_labels"].get("severity") == "page"]
        for sli in {d["group_labels"].get("sli") for d in pages}:  # each SLI's page: its group's first delivery
            sent = min((d for d in pages if d["group_labels"].get("sli") == sli), key=lambda d: d["created_at"])
            due = sent["fired_at"] + GROUP_WAIT_S
            skipped = sorted(e for e in rig.evaluations if due <= e < sent["created_at"])
            assert sent["created_at"] >= due and not skipped, (name, sli, "not queued at the first evaluation past "
                                                               "group_wait", sent, skipped)
            msg = next(m for m in rig.slack.posted() if str(m.get("text", "")).startswith(f"PAGE: SLO {name} {sli} "))
            assert sent["tried_at"] <= msg["at"] <= sent["acked_at"], (name, sli, "Slack's message is not the "
                                                                       "delivery the daemon recorded", sent, msg["at"])
        assert pages, (name, "paged, but the daemon recorded no page delivery")
        first = next(m for m in rig.slack.posted() if str(m.get("text", "")).startswith(f"PAGE: SLO {name} "))
        delays[name] = first["at"] - rec.paged
        assert rig._slack_resolved(name) or {(name, sli) for sli in {d["group_labels"].get("sli") for d in pages}} \
            <= set(rig.still_right), (name, "no RESOLVED in Slack", rig.still_right)
    return delays


def prometheus_pages_the_same(rig: Rig) -> None:
    """The generated rules in a real Prometheus paged exactly the SLO/SLIs the daemon paged, and resolved."""
    daemon = {(n, sli) for n, r in rig.records.items() for sli, sev in r.alerts_fired if sev == "page"}
    am_pages = {(a["labels"]["slo"], a["labels"]["sli"]) for n in rig._am_notes() for a in n["json"]["alerts"]
                if a["labels"].get("severity") == "page" and a["labels"].get("alertname") == BURN}
    # Prometheus's pages: those polled while the faults ran, and those Alertmanager (which hears only Prometheus)
    # delivered; a page that fired between polls still reached Alertmanager
    prom = am_pages | {(a["labels"]["slo"], a["labels"]["sli"]) for a in rig.during["prom"] + rig.prom_pages()
                       if a["labels"].get("alertname") == BURN and a["labels"].get("severity") == "page"}
    # The same SLOs page, each fault's own SLI in both; a second SLI near its threshold may cross it in one
    # evaluator and not the other (1 s Prometheus rule evaluations of scraped counters against the daemon's own).
    # A fault's own SLI may page in one only where its rows held, on the SLO's stored requests, for less than
    # MARGINAL_S in all (measured: Prometheus's increase() read 14.1 bad where the daemon counted 15, the bar)
    assert {n for n, _ in prom} == {n for n, _ in daemon}, (prom, daemon)
    for name, rec in rig.records.items():
        if rec.fault.payload and rec.fault.sli and (name, rec.fault.sli) not in prom & daemon:
            held = rig.held_for((name, rec.fault.sli, "page"), rig.started, rig.cured)
            assert (name, rec.fault.sli) in prom | daemon and held < MARGINAL_S, \
                (name, rec.fault.sli, f"paged in one evaluator only, its rows held {held:.0f} s", prom, daemon)
    assert not [a for a in rig.after["prom"] if a["labels"].get("alertname") == BURN and a["state"] == "firing"
                and a["labels"].get("severity") == "page"
                and (a["labels"]["slo"], a["labels"]["sli"]) not in rig.still_right], rig.still_right


def table(rig: Rig, delays: dict[str, float]) -> str:
    """Return the per-fault figures the issue asks for, as a Markdown table."""
    rows = ["| fault | alerts fired | Slack messages | Alertmanager notifications | time to page | time to verdict |",
            "| --- | --- | --- | --- | --- | --- |"]
    for name, r in rig.records.items():
        msgs = sum(f" SLO {name} " in str(m.get("text")) for m in rig.slack.posted())
        am = sum(any(a["labels"].get("slo") == name for a in n["json"]["alerts"]) for n in rig._am_notes())
        page = f"{r.paged - r.injected:.0f} s" if r.paged and r.injected else "-"
        verdict = f"{r.verdict - r.injected:.0f} s" if r.verdict and r.injected else "-"
        fired = ", ".join(f"{sli} {sev}" for sli, sev in sorted(r.alerts_fired)) or "none"
        rows.append(f"| {name} | {fired} | {msgs} | {am} | {page} | {verdict} |")
    return "\n".join(rows) + f"\n(measured {time.strftime('%Y-%m-%d %H:%M')}; Slack delays {delays})"
