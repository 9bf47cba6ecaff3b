"""The facade the daemon uses: evaluate rules on each snapshot, persist state, deliver through the outbox."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from prometheus_client.core import Metric

from sloguard.alerts import engine
from sloguard.alerts.annotate import Extra, annotate_all
from sloguard.alerts.engine import Alert
from sloguard.alerts.notifiers import NOTIFIERS, DeliveryError, Notifier
from sloguard.alerts.notifiers.base import scrub
from sloguard.alerts.outbox import Item, Outbox
from sloguard.alerts.routing import Group, Notification, matches, route
from sloguard.alerts.rules import UNDELIVERED_METRIC, rules_from_config
from sloguard.alerts.state import AlertState, alert_to_dict
from sloguard.clock import Clock
from sloguard.config.notifiers import AlertmanagerNotifierSpec, NotifierSpec
from sloguard.config.spec import Config
from sloguard.families import declare
from sloguard.log import register_secret
from sloguard.model import Sample

log = logging.getLogger("sloguard.alerts")
POLL_INTERVAL = 0.5  # seconds between outbox scans when nothing wakes the sender earlier
OUTCOMES = ("sent", "retried", "failed", "expired", "duplicate_possible", "superseded", "standby")
ALERTS = declare("sloguard_alerts", "gauge", "Active alerts of sloguard's own rule engine, by state.",
                 ("alertname", "alertstate"))
NOTIFICATIONS = declare("sloguard_notifications", "counter", "Notification delivery attempts by outcome (since "
                        "process start).", ("notifier", "outcome"))
PENDING = declare("sloguard_outbox_pending", "gauge", "Notifications waiting in the durable outbox.", ("notifier",))
UNDELIVERED = declare(UNDELIVERED_METRIC, "gauge", "Notifications that failed permanently or expired in the last hour.",
                      ("notifier", "outcome"))


class StoreLike(Protocol):
    conn: Any


class LeaderLike(Protocol):
    handover: float

    def is_leader(self) -> bool:
        """Return whether this replica delivers notifications now."""
        ...


class Alerting:
    """Rule engine + routing + durable outbox + notifiers; state survives restarts (SQLite)."""

    def __init__(self, cfg: Config, store: StoreLike, clock: Clock, secrets: Mapping[str, str],
                 rng: random.Random | None = None, startup_grace: float = 0.0,
                 leader: LeaderLike | None = None) -> None:
        """Load persisted alerts and groups, build rules and notifiers.

        `startup_grace` (seconds from construction): while it lasts, alerts restored from the store
        (pending or firing) whose input series are absent from the evaluated samples are held as they were,
        neither resolved (no resolved notice, no re-page later) nor advanced, because right after a restart
        the scrape/NVML/probe series may not exist yet. Restored alerts whose series are present, and all
        new alerts, are evaluated normally. After the grace an absent series means false, as always.
        The daemon passes max(2 × the longest source/probe interval, 3 × evaluation_interval).
        """
        self.clock = clock
        self.leader = leader  # HA (sloguard.fleet.leader): only the leader delivers; None = always deliver
        self.lock: threading.RLock = getattr(store, "lock", None) or threading.RLock()
        self.conn = store.conn
        with self.lock:
            self.state = AlertState(self.conn)
            self.active, self.groups = self.state.load()
        self._grace_until = clock.now() + startup_grace
        self._restored = frozenset(self.active)
        self.outbox = Outbox(self.conn, self.lock, rng)
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.reconfigure(cfg, secrets)

    def reconfigure(self, cfg: Config, secrets: Mapping[str, str]) -> None:
        """Swap rules and notifiers; build everything first so a bad notifier keeps the old set."""
        rules = rules_from_config(cfg)
        for value in secrets.values():
            register_secret(value)
        self._secrets = tuple(secrets.values())
        notifiers = {s.name: NOTIFIERS[s.type](s, secrets.get(s.name), self.clock) for s in cfg.notifiers}
        with self.lock:
            self.rules, self.specs, self.notifiers = rules, {s.name: s for s in cfg.notifiers}, notifiers
            self._superseding = frozenset(s.name for s in cfg.notifiers if isinstance(s, AlertmanagerNotifierSpec))

    def _own_samples(self, now: float) -> list[Sample]:
        return [Sample(UNDELIVERED_METRIC, {"notifier": n, "outcome": o}, float(c))
                for (n, o), c in self.outbox.undelivered(now).items()]

    def evaluate(self, samples: Sequence[Sample], now: float, extra: Extra | None = None) -> list[engine.Transition]:
        """Step every rule at `now`, route, and commit new state and notifications in one transaction.

        `extra(labels)`: annotations to merge into each alert (the incident model's view of an SLO alert's SLO).
        Return the firing/resolved transitions (each logged once; an unchanged alert logs nothing).
        """
        with self.lock:
            hold = self._restored if now < self._grace_until else frozenset()
            active, events = engine.evaluate(self.rules, self.active, [*samples, *self._own_samples(now)], now, hold)
            if extra is not None:
                active, events = annotate_all(active, events, extra)
            firing = [a for a in active.values() if a.state == "firing"]
            groups, notes = route(list(self.specs.values()), self.groups, firing, now)
            with self.conn:
                self.state.save(active, groups)
                self.outbox.put(notes, now, self._superseding)
            self.active, self.groups = active, groups
        for ev in events:
            log.info("alert %s", ev.kind, extra={"alertname": ev.alert.name, "labels": dict(ev.alert.labels)})
        if notes and self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake.set)
        return events

    def post(self, alert: Alert, now: float) -> list[str]:
        """Queue a one-off message (a release report) for every notifier whose `match` takes its labels.

        Durable like alerts (outbox, retries); its own group per message, so no alert group is touched.
        Return the notifiers it was queued for.
        """
        with self.lock:
            notes = [Notification(s.name, f"{s.name}/message/{alert.fingerprint}", "firing", (), (alert,), now)
                     for s in self.specs.values() if matches(s, dict(alert.labels))]
            with self.conn:
                self.outbox.put(notes, now)
        if notes and self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake.set)
        return [n.notifier for n in notes]

    async def run(self) -> None:
        """Deliver outbox items until cancelled; no notifier exception ends the loop."""
        self._loop = asyncio.get_running_loop()
        while True:
            try:
                await self.deliver_due()
            except Exception:
                log.exception("alert delivery loop error (continuing)")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_INTERVAL):
                    await self._wake.wait()
            self._wake.clear()

    async def deliver_due(self) -> None:
        """Attempt every due item once, notifiers in parallel, each notifier's groups in order."""
        now = self.clock.now()
        with self.lock:
            notifiers, specs = dict(self.notifiers), dict(self.specs)
        for orphan in set(self.outbox.pending()) - set(specs):
            self.outbox.expire_old(orphan, now, 0.0)  # notifier removed by a reload: expire loudly
        await asyncio.gather(*(self._deliver_notifier(n, specs[name], now) for name, n in notifiers.items()))

    async def _deliver_notifier(self, notifier: Notifier, spec: NotifierSpec, now: float) -> None:
        """Deliver due items group by group; after a round with an ack, go on at once with the next ones."""
        if self.leader is not None and not self.leader.is_leader():
            self.outbox.stand_by(spec.name, now, self.leader.handover)  # another replica sends
            return
        self.outbox.expire_old(spec.name, now, spec.max_delivery_age)
        progress = True
        while progress:
            results = [await self._deliver(notifier, spec, item) for item in self.outbox.take(spec.name, now)]
            progress = any(results)

    async def _deliver(self, notifier: Notifier, spec: NotifierSpec, item: Item) -> bool:
        """Attempt one item; return whether the receiver acknowledged it."""
        tried_at = self.clock.now()
        try:
            ref = await notifier.send(item.notification, item.ref)
        except DeliveryError as exc:
            if exc.retryable:
                self.outbox.retry(item, str(exc), self.clock.now(), spec.max_delivery_age, exc.retry_after,
                                  exc.ambiguous)
            else:
                self.outbox.fail(item, str(exc), self.clock.now())
        except Exception as exc:  # a notifier bug must not lose the notification: retry until expiry
            msg = scrub(f"{type(exc).__name__}: {exc}", self._secrets)
            self.outbox.retry(item, msg, self.clock.now(), spec.max_delivery_age)
        else:
            self.outbox.ack(item, ref, tried_at, self.clock.now())
            return True
        return False

    def prune(self, now: float) -> int:
        """Delete dead-letter notifications older than 7 days (outbox.DEAD_KEEP); return how many.

        Meant for the daemon's hourly housekeeping; the count of undelivered notifications in the last
        hour (which keeps SloguardNotificationExpired/Failed firing) is unaffected.
        """
        return self.outbox.prune(now)

    def families(self, now: float) -> list[Metric]:
        """Return sloguard_alerts, sloguard_notifications_total, sloguard_outbox_pending, ..._undelivered."""
        alerts = ALERTS.gauge()
        for (name, st), c in sorted(Counter((a.name, a.state) for a in self.active.values()).items()):
            alerts.add_metric([name, st], c)
        total, pending, undelivered = NOTIFICATIONS.counter(), PENDING.gauge(), UNDELIVERED.gauge()
        waiting = self.outbox.pending()
        for name in sorted(self.specs):
            for outcome in OUTCOMES:
                total.add_metric([name, outcome], self.outbox.counts[(name, outcome)])
            pending.add_metric([name], waiting.get(name, 0))
        for (name, outcome), c in sorted(self.outbox.undelivered(now).items()):
            undelivered.add_metric([name, outcome], c)
        return [alerts, total, pending, undelivered]

    def debug_json(self) -> dict[str, object]:
        """Return active alerts, groups and the outbox for GET /debug/alerts (no secrets)."""
        with self.lock:
            active: list[Alert] = sorted(self.active.values(), key=lambda a: a.labels)
            groups: list[Group] = list(self.groups.values())
        return {
            "active": [alert_to_dict(a) for a in active],
            "groups": [{"notifier": g.notifier, "key": g.key, "labels": dict(g.labels), "alerts": len(g.alerts),
                        "next_flush": g.next_flush, "last_sent_at": g.last_sent_at} for g in groups],
            "notifiers": [{"name": s.name, "type": s.type} for s in self.specs.values()],
            "outbox": self.outbox.debug(),
        }

    async def close(self) -> None:
        """Close notifiers; undelivered items stay in the outbox for the next start."""
        for n in self.notifiers.values():
            await n.close()
