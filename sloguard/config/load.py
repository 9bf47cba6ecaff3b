"""Load YAML into a validated Config; every problem becomes one `PATH: message` line, all at once."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from sloguard.config.checks import Invalid, cross_check
from sloguard.config.files import FileError, kind_of, parse_yaml, read_text, shown
from sloguard.config.fleet import DiscoverySpec
from sloguard.config.notifiers import NotifierSpec
from sloguard.config.spec import (
    AlertSpec,
    Config,
    HostSpec,
    ProbeSpec,
    ProcessSpec,
    ServiceSpec,
    SLOSpec,
    TargetSpec,
)
from sloguard.config.suggest import did_you_mean, number_hint, ratio_hint

# Discriminator tags pydantic inserts into error locations of tagged unions; they are not config keys.
_UNION_TAGS = frozenset({"slack", "alertmanager", "webhook", "log", "console"})
_FORM_TAGS = frozenset({"budget-short", "budget-long"})  # the two forms of a stage budget (config.spec)


class ConfigError(Exception):
    """Configuration is invalid; `errors` holds one `PATH: message` line per problem."""

    def __init__(self, errors: Sequence[str], source: str = "", file_problem: bool = False) -> None:
        self.errors = list(errors)
        self.source = source
        self.file_problem = file_problem
        head = f"{source}: " if source else ""
        super().__init__(head + f"{len(self.errors)} error(s):\n" + "\n".join(self.errors))

    @classmethod
    def from_file(cls, exc: FileError) -> ConfigError:
        """Wrap a whole-file problem (unreadable, not UTF-8, not YAML): one line that names the path."""
        return cls([str(exc)], exc.path, file_problem=True)

    def report(self, source: str = "") -> str:
        """Return what a command prints: the one `PATH: why` line of a file problem, else a header and lines."""
        if self.file_problem:
            return self.errors[0]
        name = self.source or source
        return "\n".join([f"{name}: invalid configuration ({len(self.errors)} error(s))", *self.errors])


def _is_noise(part: str, prev: int | str | None) -> bool:
    return (isinstance(prev, int) and part in _UNION_TAGS) or part in _FORM_TAGS or part == "[key]" or part.startswith(
        ("function-", "tagged-union"))


def format_path(loc: Sequence[int | str]) -> str:
    """Render a pydantic location as `slos[1].objectives[0].threshold`."""
    out = ""
    prev: int | str | None = None
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _is_noise(part, prev):  # a key as written in the file: bounded, controls shown
            out += ("." if out else "") + (part if part.isidentifier() and len(part) <= 64 else shown(part))
        prev = part
    return out or "(root)"


def _message(err: Any) -> str:
    kind, msg = err["type"], err["msg"]
    ctx = {k: (f"{v:g}" if isinstance(v, float) else v) for k, v in (err.get("ctx") or {}).items()}
    simple = {
        "greater_than": "must be > {gt}",
        "greater_than_equal": "must be >= {ge}",
        "less_than": "must be < {lt}",
        "less_than_equal": "must be <= {le}",
        "extra_forbidden": "unknown key",
        "missing": "required key is missing",
        "string_pattern_mismatch": "does not match the pattern {pattern}",
        "too_short": "must have at least {min_length} item(s)",
    }
    if (hint := ratio_hint(err)) is not None:
        return hint
    if kind in simple:
        return simple[kind].format(**ctx)
    if (hint := number_hint(err)) is not None:
        return hint
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}, got {shown(err.get('input'))}"
    if kind == "union_tag_invalid":
        return f"unknown type {shown(ctx.get('tag'))}: expected one of {ctx.get('expected_tags')}"
    if kind == "value_error":
        return str(msg).removeprefix("Value error, ")
    return str(msg)


def errors_from_validation(exc: ValidationError) -> list[str]:
    """Turn pydantic's errors into `PATH: message` lines, in document order."""
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        if err["type"] == "extra_forbidden" and loc:
            lines.append(f"{format_path(loc)}: unknown key{did_you_mean(Config, loc)}")
            continue
        lines.append(f"{format_path(loc)}: {_message(err)}")
    return lines


_LISTS: dict[str, Any] = {"targets": TargetSpec, "probes": ProbeSpec, "slos": SLOSpec, "alerts": AlertSpec,
                          "notifiers": TypeAdapter(NotifierSpec), "services": ServiceSpec, "discovery": DiscoverySpec}


def _items(raw: Any, model: Any) -> list[Any]:
    out: list[Any] = []
    for item in raw if isinstance(raw, list) else []:
        try:
            out.append(model.model_validate(item) if isinstance(model, type) and issubclass(model, BaseModel)
                       else model.validate_python(item))
        except ValidationError:
            out.append(Invalid(str(item.get("name", "")) if isinstance(item, dict) else ""))
    return out


def partial_config(data: dict[str, Any]) -> Config:
    """Return a Config of the list items that validate (others as Invalid), so cross-checks still run."""
    fields = {key: _items(data.get(key), model) for key, model in _LISTS.items()}
    fields["targets"] = [*fields["targets"], *(s for s in fields["services"] if isinstance(s, ServiceSpec))]
    host = data.get("host") if isinstance(data.get("host"), dict) else {}
    procs = _items(host.get("processes"), ProcessSpec)  # type: ignore[union-attr]
    construct: Any = Config.model_construct  # the lists hold Invalid stand-ins, which the typed signature forbids
    result: Config = construct(version="sloguard/v1", host=HostSpec.model_construct(processes=procs), **fields)
    return result


def parse_config(data: Any, source: str = "") -> Config:
    """Validate a parsed YAML document; raise ConfigError with every problem found, cross-field ones too."""
    if not isinstance(data, dict):
        raise ConfigError.from_file(FileError(source or "<string>", f"must be a YAML mapping of sloguard keys "
                                              f"(version: sloguard/v1, targets: ...), got {kind_of(data)}"))
    try:
        cfg = Config.model_validate(data)
    except ValidationError as exc:
        errors = errors_from_validation(exc)
        raise ConfigError(errors + [e for e in cross_check(partial_config(data)) if e not in errors],
                          source) from None
    problems = cross_check(cfg)
    if problems:
        raise ConfigError(problems, source)
    return cfg


def load_config(path: str | Path) -> Config:
    """Read and validate a config file; raise ConfigError (never another exception) on any problem."""
    try:
        text = read_text(path)
    except FileError as exc:
        raise ConfigError.from_file(exc) from None
    return load_config_text(text, str(path))


def load_config_text(text: str, source: str = "<string>") -> Config:
    """Validate YAML text; raise ConfigError on syntax or schema problems."""
    try:
        data = parse_yaml(text, source)
    except FileError as exc:
        raise ConfigError.from_file(exc) from None
    return parse_config(data, source)
