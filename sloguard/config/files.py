"""Read the files sloguard is pointed at (config, web config, secrets, results) with one-line `PATH: why` errors.

Every way a file can be unusable (missing, a directory, unreadable, over 16 MiB, not UTF-8, binary, not YAML)
becomes a FileError whose message is a single line naming the path; no exception of another type escapes.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

import yaml

MAX_BYTES = 16 * 1024 * 1024
_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
         (codecs.BOM_UTF16_BE, "UTF-16"))


class FileError(ValueError):
    """A file cannot be used; str() is one line, `PATH: problem`."""

    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


def read_text(path: str | Path, limit: int = MAX_BYTES, quote_bytes: bool = True) -> str:
    """Return the file as UTF-8 text (a UTF-8 BOM dropped); raise FileError for any other outcome.

    quote_bytes=False keeps the offending byte out of the message (secret files).
    """
    p = Path(path)
    try:
        with p.open("rb") as fh:
            data = fh.read(limit + 1)
    except IsADirectoryError:
        raise FileError(p, "is a directory, not a file") from None
    except OSError as exc:
        raise FileError(p, f"cannot read: {exc.strerror or type(exc).__name__}") from None
    if len(data) > limit:
        raise FileError(p, f"larger than {limit} bytes: not the file sloguard expects here")
    return decode(p, data, quote_bytes)


def decode(path: str | Path, data: bytes, quote_bytes: bool = True) -> str:
    """Decode bytes read from `path` as UTF-8 text; raise FileError naming the first bad byte."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise FileError(path, f"is {name} text (byte-order mark); save it as UTF-8")
    nul = data.find(b"\0")
    if nul != -1:
        raise FileError(path, f"binary file (NUL byte at offset {nul}), not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        byte = f"byte 0x{data[exc.start]:02x} " if quote_bytes else "a byte "
        raise FileError(path, f"not UTF-8 text ({byte}at offset {exc.start}); is it a binary file?") from None


def parse_yaml(text: str, path: str | Path) -> Any:
    """Return the YAML document in `text`; raise FileError `PATH: not valid YAML: line L, column C: problem`."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FileError(path, f"not valid YAML: {_yaml_problem(exc)}") from None
    except RecursionError:
        raise FileError(path, "not valid YAML: nested too deeply") from None


def kind_of(data: Any) -> str:
    """Name a parsed YAML value's kind for an error message ("a list", "a string", "an empty file")."""
    if data is None:
        return "an empty file"
    names = {str: "a string", list: "a list", int: "a number", float: "a number", bool: "a boolean"}
    return names.get(type(data), f"a {type(data).__name__}")


def load_yaml(path: str | Path) -> Any:
    """Read and parse a YAML file; raise FileError for every unreadable, undecodable or non-YAML file."""
    return parse_yaml(read_text(path), path)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc).splitlines()[0]
    if isinstance(exc, yaml.reader.ReaderError):
        char = chr(exc.character) if isinstance(exc.character, int) else exc.character
        return f"offset {exc.position}: unacceptable character {char!r}"
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}"
