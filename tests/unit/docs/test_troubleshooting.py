"""docs/troubleshooting.md quotes every error a user can meet from the start-up, file, secret, report and bench
paths (the fixed words of each message), and every reason a source can fail with."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PAGE = (ROOT / "docs" / "troubleshooting.md").read_text()
# The exceptions whose text reaches the user as the one line a command prints (and statedir's _error helper).
RAISED = {"StateDirError", "ListenError", "SecretError", "DataError", "UsageError", "DatasetError", "FileError",
          "PreflightError", "_error"}


def _name(call: ast.Call) -> str | None:
    return getattr(call.func, "id", getattr(call.func, "attr", None))


def _fixed_words(arg: ast.expr) -> list[str]:
    """Return the literal parts of a message (an f-string's text between its placeholders)."""
    nodes = list(ast.walk(arg))
    parts = [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return [p.strip(" :;,()'\"") for p in parts]


def _calls() -> list[tuple[str, int, ast.Call]]:
    out = []
    for path in sorted((ROOT / "sloguard").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                out.append((str(path.relative_to(ROOT)), node.lineno, node))
    return out


def test_every_user_facing_error_is_on_the_page() -> None:
    missing = []
    for where, line, call in _calls():
        if _name(call) not in RAISED:
            continue
        words = [w for arg in call.args for w in _fixed_words(arg) if len(w) >= 12]
        if words and max(words, key=len) not in PAGE:
            missing.append(f"{where}:{line}: {max(words, key=len)!r}")
    assert not missing, "quote these in docs/troubleshooting.md:\n" + "\n".join(missing)


def test_every_source_failure_reason_is_on_the_page() -> None:
    reasons = {call.args[0].value for _, _, call in _calls() if _name(call) == "SourceError" and call.args
               and isinstance(call.args[0], ast.Constant)}
    assert reasons and not {r for r in reasons if f"`{r}`" not in PAGE}
