import pytest

from sloguard import escape

HOSTILE = "<!channel> <https://evil.example/|x> & `a`\n# INJECTED <img src=x>\x1b[31m\u2028\u202e"


@pytest.mark.parametrize(("fn", "value", "want"), [
    (escape.slack, "<!channel> a&b", "&lt;!channel&gt; a&amp;b"),
    (escape.slack, "<https://evil.example/|x>", "&lt;https://evil.example/|x&gt;"),
    (escape.markdown, "v1\n# H", "`v1\\x0a# H`"),
    (escape.markdown, "a`b", "``a`b``"),
    (escape.markdown, "`", "`` ` ``"),
    (escape.logfmt, "plain", "plain"),
    (escape.logfmt, 'a "b"\n', '"a \\"b\\"\\n"'),
    (escape.logfmt, "\x1b[31m\u2028", '"\\u001b[31m\\u2028"'),
    (escape.logfmt, "", '""'),
    (escape.terminal, "\x1b[2J\r", "\\x1b[2J\\x0d"),
    (escape.terminal, "a\u2028b", "a\\u2028b"),
    (escape.html, "<b x='1'>", "&lt;b x=&#x27;1&#x27;&gt;"),
])
def test_sink_escapes(fn, value: str, want: str) -> None:
    assert fn(value) == want


@pytest.mark.parametrize("fn", [escape.slack, escape.markdown, escape.markdown_text, escape.logfmt, escape.terminal,
                                escape.html, escape.lines])
def test_no_sink_passes_a_control_character(fn) -> None:
    out = fn(HOSTILE)
    kept = "\n" if fn in (escape.slack, escape.lines) else ""  # a new line is no markup in mrkdwn or JSON text
    assert not any((ord(c) < 0x20 and c not in kept) or c in "\u2028\u202e\x7f" for c in out)
