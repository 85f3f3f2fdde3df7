"""Small dependency-free SVG charts for the report: line, histogram and horizontal bars.

Every chart is one ``<svg class="chart" id=...>`` element with a ``<title>``; marks carry classes
(``series``, ``bar``, ``threshold``) so tests and stylesheets can find them. Text is escaped.
"""

from __future__ import annotations

import math
import unicodedata
from datetime import date
from html import escape
from typing import Callable, Sequence

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#9c755f"]
W, H = 640, 300
M_LEFT, M_RIGHT, M_TOP, M_BOTTOM = 56, 16, 48, 44


def _nice_ticks(lo: float, hi: float, n: int = 5, *, integer: bool = False) -> list[float]:
    """Round ticks from ``lo`` to at least ``hi``; ``integer`` (counts) keeps every step a whole
    number (1, 2, 5, 10, ...; never 2.5 or 0.5)."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    if integer:
        raw = max(raw, 1.0)
    mag = 10 ** math.floor(math.log10(raw))
    steps = (1, 2, 5, 10) if integer else (1, 2, 2.5, 5, 10)
    step = next(m * mag for m in steps if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    t = start
    while True:  # up to the first tick at or above hi, so the data never overflows the axis
        if t >= lo - step * 1e-9:
            ticks.append(round(t, 10))
        if t >= hi - step * 1e-9:
            return ticks
        t += step


def _fmt(v: float) -> str:
    return f"{v:.0f}" if float(v).is_integer() else f"{v:.2f}".rstrip("0")


def _clip(text: str, columns: int) -> str:
    """Cut ``text`` to about ``columns`` Latin-letter widths (wide CJK characters count 2)."""
    used = 0
    for i, ch in enumerate(text):
        used += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
        if used > columns:
            return text[:i].rstrip() + "…"
    return text


def _frame(chart_id: str, title: str, body: list[str], height: int = H) -> str:
    return (
        f'<svg class="chart" id="{escape(chart_id)}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {W} {height}" width="100%" preserveAspectRatio="xMinYMin meet" role="img" '
        f'aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>"
        f'<text class="chart-title" x="{M_LEFT}" y="20" font-size="14" font-weight="600">{escape(title)}</text>'
        + "".join(body) + "</svg>"
    )


def _empty(chart_id: str, title: str, message: str) -> str:
    return _frame(chart_id, title, [
        f'<text class="empty" x="{W / 2}" y="{H / 2}" text-anchor="middle" fill="#888">{escape(message)}</text>'
    ])


def _y_axis(ticks: list[float], y_of: Callable[[float], float], label: str) -> list[str]:
    out = []
    for t in ticks:
        y = y_of(t)
        out.append(f'<line x1="{M_LEFT}" x2="{W - M_RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{M_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{_fmt(t)}</text>')
    out.append(f'<text x="14" y="{(M_TOP + H - M_BOTTOM) / 2:.0f}" font-size="11" text-anchor="middle" '
               f'transform="rotate(-90 14 {(M_TOP + H - M_BOTTOM) / 2:.0f})">{escape(label)}</text>')
    return out


def _legend(names: Sequence[str], colors: Sequence[str]) -> list[str]:
    """One row under the title, left to right."""
    out = []
    x = M_LEFT
    for name, color in zip(names, colors):
        out.append(f'<rect x="{x}" y="28" width="10" height="10" fill="{color}"/>'
                   f'<text class="legend" x="{x + 14}" y="37" font-size="11">{escape(name)}</text>')
        x += 24 + 7 * len(name)
    return out


def line_chart(chart_id: str, title: str, series: dict[str, list[tuple[date, float]]], y_label: str,
               dashed: set[str] | frozenset[str] = frozenset()) -> str:
    """Step lines over dates, one per series (e.g. cumulative memories per kind); the y axis counts
    (integer ticks). Series named in ``dashed`` are drawn dashed in grey."""
    points = [p for s in series.values() for p in s]
    if not points:
        return _empty(chart_id, title, "no memories yet")
    d0 = min(p[0] for p in points).toordinal()
    d1 = max(p[0] for p in points).toordinal()
    if d1 == d0:
        d0, d1 = d0 - 1, d1 + 1
    ymax = max(p[1] for p in points)
    ticks = _nice_ticks(0, ymax, integer=True)
    top = ticks[-1] if ticks[-1] > 0 else 1

    def x_of(d: date) -> float:
        return M_LEFT + (d.toordinal() - d0) / (d1 - d0) * (W - M_LEFT - M_RIGHT)

    def y_of(v: float) -> float:
        return H - M_BOTTOM - v / top * (H - M_TOP - M_BOTTOM)

    body = _y_axis(ticks, y_of, y_label)
    n_ticks = min(5, d1 - d0)
    for i in range(n_ticks + 1):
        d = date.fromordinal(d0 + round(i * (d1 - d0) / n_ticks))
        anchor = "start" if i == 0 else "end" if i == n_ticks else "middle"
        body.append(f'<text x="{x_of(d):.1f}" y="{H - M_BOTTOM + 16}" font-size="10" text-anchor="{anchor}">'
                    f"{d.isoformat()}</text>")
    colors = []
    for i, (name, pts) in enumerate(series.items()):
        color = "#777" if name in dashed else PALETTE[i % len(PALETTE)]
        colors.append(color)
        pts = sorted(pts)
        if not pts:
            continue
        path = [f"M{x_of(pts[0][0]):.1f},{y_of(0):.1f}", f"V{y_of(pts[0][1]):.1f}"]
        for (_, v0), (d, v) in zip(pts, pts[1:]):
            path.append(f"H{x_of(d):.1f}V{y_of(v):.1f}")
        path.append(f"H{W - M_RIGHT}")
        dash = ' stroke-dasharray="6,4"' if name in dashed else ""
        body.append(f'<path class="series" data-series="{escape(name)}" d="{"".join(path)}" fill="none" '
                    f'stroke="{color}" stroke-width="2"{dash}/>')
        for d, v in pts:
            body.append(f'<circle cx="{x_of(d):.1f}" cy="{y_of(v):.1f}" r="3" fill="{color}">'
                        f"<title>{escape(name)} {d.isoformat()}: {_fmt(v)}</title></circle>")
    body += _legend(list(series), colors)
    return _frame(chart_id, title, body)


def histogram(
    chart_id: str,
    title: str,
    edges: Sequence[float],
    layers: dict[str, Sequence[int]],
    x_label: str,
    threshold: float | None = None,
    threshold_label: str = "threshold",
) -> str:
    """Bars over ``edges`` (len(counts)+1), one overlaid layer per named count list."""
    if not layers or not any(sum(c) for c in layers.values()):
        return _empty(chart_id, title, "no data yet")
    lo, hi = edges[0], edges[-1]
    ymax = max(max(c) for c in layers.values())
    ticks = _nice_ticks(0, ymax, integer=True)
    top = ticks[-1] if ticks[-1] > 0 else 1

    def x_of(v: float) -> float:
        return M_LEFT + (v - lo) / (hi - lo) * (W - M_LEFT - M_RIGHT)

    def y_of(v: float) -> float:
        return H - M_BOTTOM - v / top * (H - M_TOP - M_BOTTOM)

    body = _y_axis(ticks, y_of, "count")
    for t in _nice_ticks(lo, hi, 6):
        body.append(f'<text x="{x_of(t):.1f}" y="{H - M_BOTTOM + 16}" font-size="10" text-anchor="middle">{_fmt(t)}</text>')
    body.append(f'<text x="{(M_LEFT + W - M_RIGHT) / 2}" y="{H - 8}" font-size="11" text-anchor="middle">{escape(x_label)}</text>')
    colors = []
    for i, (name, counts) in enumerate(layers.items()):
        color = PALETTE[i % len(PALETTE)]
        colors.append(color)
        for a, b, c in zip(edges, edges[1:], counts):
            if c <= 0:
                continue
            x, w = x_of(a) + 0.5, max(1.0, x_of(b) - x_of(a) - 1)
            body.append(f'<rect class="bar" data-layer="{escape(name)}" x="{x:.1f}" y="{y_of(c):.1f}" width="{w:.1f}" '
                        f'height="{y_of(0) - y_of(c):.1f}" fill="{color}" fill-opacity="0.75">'
                        f"<title>{escape(name)} {_fmt(a)}-{_fmt(b)}: {c}</title></rect>")
    if threshold is not None and lo <= threshold <= hi:
        x = x_of(threshold)
        body.append(f'<line class="threshold" x1="{x:.1f}" x2="{x:.1f}" y1="{M_TOP}" y2="{H - M_BOTTOM}" '
                    f'stroke="#d62728" stroke-width="2" stroke-dasharray="5,3"/>'
                    f'<text x="{x + 4:.1f}" y="{M_TOP + 12}" font-size="11" fill="#d62728">'
                    f"{escape(threshold_label)} {_fmt(threshold)}</text>")
    if len(layers) > 1:
        body += _legend(list(layers), colors)
    return _frame(chart_id, title, body)


def hbar_chart(chart_id: str, title: str, labels: Sequence[str], values: Sequence[float], x_label: str) -> str:
    """Horizontal bars, largest first as given (e.g. most accessed memories)."""
    if not labels:
        return _empty(chart_id, title, "no accesses recorded yet")
    row = 24
    height = M_TOP + row * len(labels) + M_BOTTOM
    left = 300
    vmax = max(values) or 1
    body = []
    for i, (label, v) in enumerate(zip(labels, values)):
        y = M_TOP + i * row
        w = (W - left - M_RIGHT - 30) * v / vmax
        short = _clip(label, 46)
        body.append(f'<text x="{left - 6}" y="{y + 15}" font-size="11" text-anchor="end">{escape(short)}'
                    f"<title>{escape(label)}</title></text>")
        body.append(f'<rect class="bar" x="{left}" y="{y + 3}" width="{max(w, 1):.1f}" height="{row - 6}" '
                    f'fill="{PALETTE[0]}"><title>{escape(label)}: {_fmt(v)}</title></rect>')
        body.append(f'<text x="{left + w + 4:.1f}" y="{y + 15}" font-size="11">{_fmt(v)}</text>')
    body.append(f'<text x="{(left + W) / 2}" y="{height - 12}" font-size="11" text-anchor="middle">{escape(x_label)}</text>')
    return _frame(chart_id, title, body, height=height)
