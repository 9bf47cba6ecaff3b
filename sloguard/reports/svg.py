"""Inline SVG plots (no scripts, no external files): line charts, interval (forest) plots, stacked bars.

Every plot scales with its container (viewBox, width 100 %) so it reads on a phone, and carries
`class="plot"` plus `data-series` / `data-points` so a test can check what was drawn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

COLORS = {"baseline": "#3b6ea8", "candidate": "#d9731a"}
W, H, PAD_L, PAD_R, PAD_T, PAD_B = 640, 320, 84, 20, 16, 52


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 1)]


def _fmt(x: float, unit: str) -> str:
    if unit == "s":
        return f"{x * 1e3:g} ms" if abs(x) < 1 else f"{x:g} s"
    if unit == "%":
        return f"{x * 100:g} %"
    return f"{x:g}"


def _frame(title: str, xs: tuple[float, float], ys: tuple[float, float], x_unit: str, y_unit: str, x_label: str,
           y_label: str, series: int, points: int) -> tuple[list[str], object, object]:
    (x0, x1), (y0, y1) = xs, ys
    pw, ph = W - PAD_L - PAD_R, H - PAD_T - PAD_B

    def sx(x: float) -> float:
        return PAD_L + (x - x0) / (x1 - x0 or 1) * pw

    def sy(y: float) -> float:
        return PAD_T + ph - (y - y0) / (y1 - y0 or 1) * ph

    out = [f'<svg class="plot" role="img" aria-label="{escape(title)}" viewBox="0 0 {W} {H}" '
           f'data-series="{series}" data-points="{points}" xmlns="http://www.w3.org/2000/svg">',
           f"<title>{escape(title)}</title>",
           f'<rect x="{PAD_L}" y="{PAD_T}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#ccc"/>']
    for t in _ticks(x0, x1):
        out.append(f'<line x1="{sx(t):.1f}" x2="{sx(t):.1f}" y1="{PAD_T}" y2="{PAD_T + ph}" stroke="#e4e4e4"/>'
                   f'<text x="{sx(t):.1f}" y="{PAD_T + ph + 20}" font-size="15" text-anchor="middle">'
                   f"{escape(_fmt(t, x_unit))}</text>")
    for t in _ticks(y0, y1):
        out.append(f'<line x1="{PAD_L}" x2="{PAD_L + pw}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" stroke="#e4e4e4"/>'
                   f'<text x="{PAD_L - 6}" y="{sy(t) + 4:.1f}" font-size="15" text-anchor="end">'
                   f"{escape(_fmt(t, y_unit))}</text>")
    out.append(f'<text x="{PAD_L + pw / 2}" y="{H - 8}" font-size="16" text-anchor="middle">{escape(x_label)}</text>')
    out.append(f'<text x="16" y="{PAD_T + ph / 2}" font-size="16" text-anchor="middle" '
               f'transform="rotate(-90 16 {PAD_T + ph / 2})">{escape(y_label)}</text>')
    return out, sx, sy


def lines(title: str, series: Sequence[tuple[str, Sequence[tuple[float, float]]]], x_label: str, y_label: str,
          x_unit: str = "s", y_unit: str = "", step: bool = False) -> str:
    """Return a line chart (a step chart for CDFs) of named series; names pick the colours."""
    pts = [p for _, s in series for p in s if math.isfinite(p[0]) and math.isfinite(p[1])]
    if not pts:
        return ""
    xs = (min(0.0, min(p[0] for p in pts)), max(p[0] for p in pts) * 1.05 or 1.0)
    ys = (0.0, 1.0) if y_unit == "%" else (0.0, max(p[1] for p in pts) * 1.1 or 1.0)
    out, sx, sy = _frame(title, xs, ys, x_unit, y_unit, x_label, y_label, len(series), len(pts))
    for i, (name, s) in enumerate(series):
        coords = []
        prev_y = None
        for x, y in s:
            if step and prev_y is not None:
                coords.append(f"{sx(x):.1f},{sy(prev_y):.1f}")  # type: ignore[operator]
            coords.append(f"{sx(x):.1f},{sy(y):.1f}")  # type: ignore[operator]
            prev_y = y
        colour = COLORS.get(name, "#555")
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{" ".join(coords)}"/>')
        out.append(f'<rect x="{PAD_L + 10}" y="{PAD_T + 9 + 20 * i}" width="12" height="4" fill="{colour}"/>'
                   f'<text x="{PAD_L + 28}" y="{PAD_T + 15 + 20 * i}" font-size="15">{escape(name)}</text>')
    out.append("</svg>")
    return "".join(out)


def forest(title: str, rows: Sequence[tuple[str, float, float, float, str]], threshold: float) -> str:
    """Return an interval plot: per row (label, estimate, low, high, verdict) on a ±% axis with the threshold band."""
    rows = [r for r in rows if all(math.isfinite(v) for v in r[1:4])]
    if not rows:
        return ""
    height = PAD_T + PAD_B + 28 * len(rows)
    lim = max(threshold * 2, *(max(abs(r[2]), abs(r[3])) for r in rows)) * 1.1
    pw = W - 200 - PAD_R

    def sx(x: float) -> float:
        return 200 + (x + lim) / (2 * lim) * pw

    out = [f'<svg class="plot" role="img" aria-label="{escape(title)}" viewBox="0 0 {W} {height}" '
           f'data-series="1" data-points="{len(rows)}" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
           f'<rect x="{sx(-threshold):.1f}" y="{PAD_T}" width="{sx(threshold) - sx(-threshold):.1f}" '
           f'height="{28 * len(rows)}" fill="#eef3e8"/>',
           f'<line x1="{sx(0):.1f}" x2="{sx(0):.1f}" y1="{PAD_T}" y2="{PAD_T + 28 * len(rows)}" stroke="#888"/>']
    for t in _ticks(-lim, lim, 6):
        out.append(f'<text x="{sx(t):.1f}" y="{PAD_T + 28 * len(rows) + 20}" font-size="15" text-anchor="middle">'
                   f"{t * 100:+g} %</text>")
    colour = {"regression": "#c0392b", "improvement": "#2e8b57"}
    for i, (name, est, lo, hi, verdict) in enumerate(rows):
        y = PAD_T + 14 + 28 * i
        c = colour.get(verdict, "#555")
        out.append(f'<text x="194" y="{y + 5}" font-size="15" text-anchor="end">{escape(name)}</text>'
                   f'<line x1="{sx(lo):.1f}" x2="{sx(hi):.1f}" y1="{y}" y2="{y}" stroke="{c}" stroke-width="2"/>'
                   f'<circle cx="{sx(est):.1f}" cy="{y}" r="4" fill="{c}"/>')
    out.append("</svg>")
    return "".join(out)


def stacked(title: str, bars: Sequence[tuple[str, Sequence[tuple[str, float]]]]) -> str:
    """Return horizontal stacked bars (one per side) of stage times in seconds, with a legend."""
    total = max((sum(v for _, v in parts) for _, parts in bars), default=0.0)
    if total <= 0:
        return ""
    palette = ["#6c8ebf", "#b85450", "#82b366", "#d6b656", "#9673a6", "#999"]
    stages = list(dict.fromkeys(s for _, parts in bars for s, _ in parts))
    height = PAD_T + 40 * len(bars) + 60
    pw = W - 120 - 90  # room for the total at the end of the longest bar
    out = [f'<svg class="plot" role="img" aria-label="{escape(title)}" viewBox="0 0 {W} {height}" '
           f'data-series="{len(bars)}" data-points="{sum(len(p) for _, p in bars)}" '
           f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>']
    for i, (name, parts) in enumerate(bars):
        y, x = PAD_T + 40 * i, 120.0
        out.append(f'<text x="112" y="{y + 18}" font-size="16" text-anchor="end">{escape(name)}</text>')
        for stage, v in parts:
            w = v / total * pw
            colour = palette[stages.index(stage) % len(palette)]
            out.append(f'<rect x="{x:.1f}" y="{y}" width="{max(w, 0.5):.1f}" height="26" fill="{colour}">'
                       f"<title>{escape(stage)}: {v * 1e3:.1f} ms</title></rect>")
            x += w
        whole = sum(v for _, v in parts)
        out.append(f'<text x="{x + 6:.1f}" y="{y + 18}" font-size="15">{whole * 1e3:.0f} ms</text>')
    for j, stage in enumerate(stages):
        lx = 120 + (j % 4) * 125
        ly = PAD_T + 40 * len(bars) + 18 + 22 * (j // 4)
        out.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" fill="{palette[j % len(palette)]}"/>'
                   f'<text x="{lx + 14}" y="{ly}" font-size="15">{escape(stage)}</text>')
    out.append("</svg>")
    return "".join(out)
