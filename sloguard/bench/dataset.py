"""Read a local prompt dataset: `{"prompt", "max_tokens"}` rows, ShareGPT conversations, or chat messages.

Accepted (JSON Lines, or one JSON array as ShareGPT dumps are):
- `{"prompt": "...", "max_tokens": 128}` (`max_tokens` optional: the bench's `--max-tokens` then);
- ShareGPT `{"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}, ...]}`:
  the first human turn is the prompt, the reply that follows sets the output length;
- `{"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}]}` likewise.
Without a tokenizer, a reply's length is estimated as ceil(characters / 4) tokens (the same estimate as
the prompt's token count); rows without a usable prompt are skipped and counted. Never downloaded.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHARS_PER_TOKEN = 4
HUMAN = frozenset({"human", "user"})
MODEL = frozenset({"gpt", "assistant", "chatgpt", "bard", "bing", "model"})


class DatasetError(ValueError):
    """The dataset cannot be used; the message names the file (and line)."""


@dataclass(frozen=True, slots=True)
class Dataset:
    """Usable rows as (prompt text, max_tokens or 0 = the bench's default) and how many were skipped."""

    rows: tuple[tuple[str, int], ...]
    skipped: int


def estimate_tokens(text: str) -> int:
    """Return ceil(characters / 4), at least 1: the bench's token estimate without a tokenizer."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def load_dataset(path: str, limit: int = 100_000) -> Dataset:
    """Read up to `limit` usable rows; raise DatasetError naming the file and line for unreadable input."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            head = fh.read(1024).lstrip()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read: {exc.strerror or exc}") from None
    objects = _array(p) if head.startswith(b"[") else _lines(p)
    rows: list[tuple[str, int]] = []
    skipped = 0
    for where, obj in objects:
        row = _row(obj)
        if row is None:
            skipped += 1
            continue
        if row[1] < 0:
            raise DatasetError(f"{path}{where}: max_tokens must be a positive integer")
        rows.append(row)
        if len(rows) >= limit:
            break
    if not rows:
        raise DatasetError(f"{path}: no usable rows ({skipped} skipped): expected {{\"prompt\": ...}}, "
                           "ShareGPT \"conversations\" or chat \"messages\"")
    return Dataset(tuple(rows), skipped)


def _lines(p: Path) -> Iterator[tuple[str, Any]]:
    try:
        with p.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if line.strip():
                    yield f":{n}", _parse(p, n, line)
    except UnicodeDecodeError:
        raise DatasetError(f"{p}: not UTF-8 text") from None


def _array(p: Path) -> Iterator[tuple[str, Any]]:
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{p}: not a JSON array: {exc}") from None
    if not isinstance(doc, list):
        raise DatasetError(f"{p}: expected a JSON array of rows")
    for i, obj in enumerate(doc):
        yield f"[{i}]", obj


def _parse(p: Path, n: int, line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{p}:{n}: not JSON: {exc.msg}") from None


def _row(obj: Any) -> tuple[str, int] | None:
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("prompt"), str) and obj["prompt"]:
        mt = obj.get("max_tokens")
        if mt is None:
            return obj["prompt"], 0
        valid = isinstance(mt, int) and not isinstance(mt, bool) and mt > 0
        return obj["prompt"], mt if valid else -1  # -1: reported as an error naming the line
    turns = obj.get("conversations") if isinstance(obj.get("conversations"), list) else obj.get("messages")
    if not isinstance(turns, list):
        return None
    pairs = [(_speaker(t), _text(t)) for t in turns if isinstance(t, dict)]
    for i, (who, text) in enumerate(pairs):
        if who in HUMAN and text:
            reply = next((t for w, t in pairs[i + 1:] if w in MODEL and t), None)
            return text, estimate_tokens(reply) if reply else 0
    return None


def _speaker(turn: dict[str, Any]) -> str:
    return str(turn.get("from") or turn.get("role") or "").lower()


def _text(turn: dict[str, Any]) -> str:
    value = turn.get("value", turn.get("content"))
    return value if isinstance(value, str) else ""
