"""`sloguard notify-test -c FILE [--notifier N]`: send a marked test message through each notifier, print answers.

The message is a synthetic firing notification (alertname SloguardNotificationTest, severity info, label test="true")
sent with each notifier's own `send`, so it takes the real delivery path: Slack's Web API or webhook, Alertmanager's
`POST /api/v2/alerts`, a webhook, the log. Nothing goes through the outbox or routing (`match` is ignored: each
notifier is tried). Each answer is one line: ok, or the HTTP status / error the notifier raised, secrets scrubbed.
Exit 0 when every notifier took the message, 1 when one failed, 2 for a bad config or an unknown notifier name.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sloguard.alerts.engine import Alert
from sloguard.alerts.routing import Notification
from sloguard.clock import Clock, SystemClock
from sloguard.config.notifiers import NotifierSpec
from sloguard.config.spec import Config

RULE = "SloguardNotificationTest"
SEND_TIMEOUT_S = 30.0  # per notifier: Slack's SDK retries a 429 or a reset itself before it answers


@dataclass(frozen=True, slots=True)
class Answer:
    """What one notifier answered: ok, or the error it raised (never a secret)."""

    notifier: str
    kind: str
    ok: bool
    detail: str

    def line(self) -> str:
        """Return the answer as one line."""
        return f"notifier {self.notifier} ({self.kind}): {'ok' if self.ok else 'FAILED'}: {self.detail}"


def marked_notification(notifier: str, now: float, host: str | None = None) -> Notification:
    """Return the marked test message for one notifier: one firing alert that asks for no action."""
    text = f"[TEST] sloguard notification test from {host or socket.gethostname()} — no action needed"
    labels = (("alertname", RULE), ("severity", "info"), ("test", "true"))
    annotations = (("description", "Sent by `sloguard notify-test` to check this notifier delivers; it is not an "
                                   "alert."), ("headline", text), ("summary", text))
    alert = Alert(RULE, labels, annotations, "firing", now, 0.0, fired_at=now)
    return Notification(notifier, f"notify-test/{notifier}", "firing", (("alertname", RULE),), (alert,), now)


def _ok_detail(kind: str, ref: Mapping[str, str] | None) -> str:
    if ref and "channel" in ref:
        return f"posted to channel {ref['channel']} (ts {ref.get('ts', '?')})"
    return "written to the log" if kind in ("log", "console") else "accepted"


async def send_one(spec: NotifierSpec, secret: str | None, clock: Clock, host: str | None = None) -> Answer:
    """Send the test message through one notifier's real `send`; return its answer."""
    from sloguard.alerts.notifiers import NOTIFIERS, DeliveryError
    from sloguard.alerts.notifiers.base import scrub

    try:
        notifier = NOTIFIERS[spec.type](spec, secret, clock)
    except ValueError as exc:  # a missing secret: the notifier cannot be built
        return Answer(spec.name, spec.type, False, scrub(str(exc), [secret]))
    try:
        async with asyncio.timeout(SEND_TIMEOUT_S):
            ref = await notifier.send(marked_notification(spec.name, clock.now(), host), None)
        return Answer(spec.name, spec.type, True, _ok_detail(spec.type, ref))
    except DeliveryError as exc:
        retry = "retryable" if exc.retryable else "permanent"
        return Answer(spec.name, spec.type, False, f"{scrub(str(exc), [secret])} ({retry})")
    except TimeoutError:
        return Answer(spec.name, spec.type, False, f"no answer within {SEND_TIMEOUT_S:g}s")
    except Exception as exc:  # a notifier bug must not hide the other notifiers' answers
        return Answer(spec.name, spec.type, False, scrub(f"{type(exc).__name__}: {exc}", [secret])[:300])
    finally:
        await notifier.close()


async def send_all(cfg: Config, secrets: Mapping[str, str], names: Sequence[str] = (),
                   clock: Clock | None = None, host: str | None = None) -> list[Answer]:
    """Send the test message through each configured notifier (or only `names`), one after another."""
    clk = clock or SystemClock()
    return [await send_one(s, secrets.get(s.name), clk, host) for s in cfg.notifiers if not names or s.name in names]


def report(answers: Sequence[Answer]) -> int:
    """Print one line per answer (failures to stderr); return 0 when all took the message, else 1."""
    if not answers:
        print("no notifiers configured: nothing to test")
        return 0
    for a in answers:
        print(a.line(), file=sys.stdout if a.ok else sys.stderr)
    return 0 if all(a.ok for a in answers) else 1


def main(argv: list[str]) -> int:
    """Run `sloguard notify-test`; see the module docstring for what it sends and the exit codes."""
    from sloguard.config.load import ConfigError, load_config
    from sloguard.config.secrets import read_secrets

    ap = argparse.ArgumentParser(prog="sloguard notify-test", description=__doc__.splitlines()[0])
    ap.add_argument("-c", "--config", required=True, metavar="FILE", help="the sloguard config file (YAML)")
    ap.add_argument("--notifier", action="append", default=[], metavar="NAME",
                    help="test only this notifier (repeatable); default: every notifier, whatever its `match`")
    args = ap.parse_args(argv)
    try:
        cfg = load_config(args.config)
        secrets = read_secrets(cfg).notifiers
    except ConfigError as exc:
        print(exc.report(args.config), file=sys.stderr)
        return 2
    unknown = sorted(set(args.notifier) - {n.name for n in cfg.notifiers})
    if unknown:
        known = ", ".join(n.name for n in cfg.notifiers) or "none"
        print(f"{args.config}: unknown notifier {', '.join(unknown)} (configured: {known})", file=sys.stderr)
        return 2
    return report(asyncio.run(send_all(cfg, secrets, args.notifier)))
