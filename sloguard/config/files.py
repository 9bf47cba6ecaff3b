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
MAX_ALIASES = 1000  # YAML aliases (`*name`) in one document
MAX_ALIAS_NODES = 100_000  # nodes the aliases may add when expanded (a large config has ~20,000 in all)
SHOWN_CHARS = 40  # of a value quoted in an error message
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


class _TooBig(yaml.YAMLError):
    """The document's aliases would expand it beyond the limits."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that counts aliases and composed nodes while composing (before anything is constructed)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases = self.nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise _TooBig(f"more than {MAX_ALIASES} aliases")
        else:
            self.nodes += 1
        return super().compose_node(parent, index)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _check_expansion(root: yaml.Node, limit: int) -> None:
    """Raise _TooBig when the document with every alias expanded has more than `limit` nodes, or an alias
    refers to a node that contains it; linear in the composed nodes (each shared node sized once)."""
    size: dict[int, int] = {}
    path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in _children(node))
            if size[key] > limit:
                raise _TooBig(f"its aliases would add more than {MAX_ALIAS_NODES} nodes (an alias bomb?)")
            continue
        if key in size:
            continue
        if key in path:
            raise _TooBig("an alias refers to a node that contains it")
        path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node))


def parse_yaml(text: str, path: str | Path) -> Any:
    """Return the YAML document in `text`; raise FileError `PATH: not valid YAML: line L, column C: problem`.

    Aliases are limited before anything is built: at most MAX_ALIASES, adding at most MAX_ALIAS_NODES nodes
    with every alias expanded (a 533-byte alias bomb expands to 387 million), and none recursive.
    """
    loader: _Loader | None = None
    try:
        loader = _Loader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, loader.nodes + MAX_ALIAS_NODES)
        return loader.construct_document(node)
    except _TooBig as exc:
        raise FileError(path, f"not valid YAML: {exc}") from None
    except yaml.YAMLError as exc:
        raise FileError(path, f"not valid YAML: {_yaml_problem(exc)}") from None
    except RecursionError:
        raise FileError(path, "not valid YAML: nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()


def kind_of(data: Any) -> str:
    """Name a parsed YAML value's kind for an error message ("a list", "a string", "an empty file")."""
    if data is None:
        return "an empty file"
    names = {str: "a string", list: "a list", int: "a number", float: "a number", bool: "a boolean"}
    return names.get(type(data), f"a {type(data).__name__}")


def shown(value: Any) -> str:
    """Return a value as an error message quotes it: a bounded repr of a scalar, the kind of anything else."""
    if isinstance(value, str):
        return repr(value if len(value) <= SHOWN_CHARS else value[:SHOWN_CHARS] + "…")
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"a number of about {value.bit_length() * 0.30103:.0f} digits"
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    return kind_of(value)


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
