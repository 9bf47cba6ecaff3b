"""Structured logging (logfmt or JSON) with registered secret values redacted from every record."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
import traceback
from typing import Any

from sloguard.escape import logfmt

_SECRETS: set[str] = set()
_LOCK = threading.Lock()
REDACTED = "<redacted>"
_STD = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


def register_secret(value: str | None) -> None:
    """Redact this value wherever it would appear in a log line (values shorter than 4 chars are ignored)."""
    if value and len(value) >= 4:
        with _LOCK:
            _SECRETS.add(value)


def redact(text: str) -> str:
    """Return text with every registered secret replaced by <redacted>."""
    with _LOCK:
        secrets = tuple(_SECRETS)
    for s in secrets:
        if s in text:
            text = text.replace(s, REDACTED)
    return text


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
        "level": record.levelname.lower(),
        "logger": record.name,
        "msg": record.getMessage(),
    }
    for k, v in vars(record).items():
        if k not in _STD and not k.startswith("_"):
            out[k] = v
    if record.exc_info and record.exc_info[1] is not None:
        out["error"] = f"{type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
        out["traceback"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
    return out


def _logfmt_value(v: Any) -> str:
    return logfmt(str(v))  # peer text (model names, errors) may hold escape bytes, CR or U+2028


class LogfmtFormatter(logging.Formatter):
    """key=value lines, secrets redacted."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(" ".join(f"{k}={_logfmt_value(v)}" for k, v in _fields(record).items()))


class JSONFormatter(logging.Formatter):
    """One JSON object per line, secrets redacted."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(json.dumps(_fields(record), default=str))


def setup_logging(fmt: str = "logfmt", level: str = "info") -> None:
    """Configure the root logger once for the process; later calls change format and level."""
    root = logging.getLogger()
    formatter: logging.Formatter = JSONFormatter() if fmt == "json" else LogfmtFormatter()
    handler = next((h for h in root.handlers if getattr(h, "_sloguard", False)), None)
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
        handler._sloguard = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    handler.setFormatter(formatter)
    root.setLevel(level.upper())
    for noisy in ("apscheduler", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
