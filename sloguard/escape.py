"""Escape a peer string for the sink it is shown in: Slack mrkdwn, Markdown, logfmt, terminal, HTML.

Every string that came from a peer (model names, engine versions, label values, error texts) passes the escaper
of the place it is shown. Each function is total: any `str` in, a string safe for that sink out.
"""

from __future__ import annotations

import html as _html
import unicodedata

_CONTROL = {"Cc", "Cf", "Zl", "Zp", "Cs"}  # as sloguard.untrusted: controls, bidi/format, separators, surrogates
_MD_PUNCT = frozenset("\\`*[]<>&!~{}$")  # GFM markup openers ($: GitHub math); `_` below
_JSON_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def terminal(s: str) -> str:
    """Show control, format and separator characters as escapes (`\\x1b`, `\\u2028`), so no byte moves a cursor."""
    return "".join(c if unicodedata.category(c) not in _CONTROL else _escaped(c) for c in s)


def lines(s: str) -> str:
    """As `terminal`, but keep line feeds: multi-line text (annotations, descriptions) where a new line is no
    markup (JSON payloads, Slack mrkdwn)."""
    return "\n".join(terminal(part) for part in s.split("\n"))


def _escaped(c: str) -> str:
    o = ord(c)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def slack(s: str) -> str:
    """Escape for Slack mrkdwn: `&`, `<`, `>` (so no `<!channel>`, `<@U…>` or `<url|text>` link), controls
    shown, line feeds kept (a new line is no markup in mrkdwn)."""
    return lines(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def markdown(s: str) -> str:
    """Return a peer string as one inline-code span: no HTML, link, heading or newline can escape it."""
    flat = terminal(s)
    run = longest = 0
    for c in flat:
        run = run + 1 if c == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat.strip() else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def markdown_text(s: str) -> str:
    """Return peer-bearing prose for Markdown (GFM) on one line: the characters that start code, emphasis, links,
    HTML, entities, strikethrough or math backslash-escaped, and URL autolinks (`://`, `www.`) broken, so no
    markup starts (a table cell also escapes `|`, as every cell must; nothing here begins a line). GitHub still
    links a bare e-mail address to itself (no escape stops it): its text is its target, so it spoofs nothing."""
    flat = terminal(s.replace("\n", " "))
    out = "".join("\\" + c if c in _MD_PUNCT or (c == "_" and not _inside_word(flat, i)) else c
                  for i, c in enumerate(flat))
    return out.replace("://", ":\\/\\/").replace("www.", "www\\.")


def _inside_word(s: str, i: int) -> bool:
    """Return whether s[i] stands between two letters or digits (an `_` there starts no emphasis)."""
    return 0 < i < len(s) - 1 and s[i - 1].isalnum() and s[i + 1].isalnum()


def logfmt(s: str) -> str:
    """Return a logfmt value: bare when safe, else quoted with JSON escapes (`\\n`, `\\"`, `\\u001b`, `\\u2028`),
    which logfmt readers (go-logfmt, Loki, Vector) decode; no control character is ever written raw."""
    if s and not any(c in ' ="\\' or unicodedata.category(c) in _CONTROL for c in s):
        return s
    return '"' + "".join(_json_char(c) for c in s) + '"'


def _json_char(c: str) -> str:
    if c in '"\\':
        return "\\" + c
    if c in _JSON_SHORT:
        return _JSON_SHORT[c]
    if unicodedata.category(c) not in _CONTROL:
        return c
    o = ord(c)
    if o < 0x10000:
        return f"\\u{o:04x}"
    o -= 0x10000  # JSON writes an astral character as a surrogate pair
    return f"\\u{0xD800 + (o >> 10):04x}\\u{0xDC00 + (o & 0x3FF):04x}"


def html(s: str) -> str:
    """Escape for HTML text and attribute values (quotes included), controls shown."""
    return _html.escape(terminal(s), quote=True)
