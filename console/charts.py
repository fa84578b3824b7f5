"""Server-rendered SVG charts: no JavaScript, no chart library, work offline.

Each function takes plain numbers and returns SVG markup; every text is
escaped, and each bar or point has a ``<title>`` so hovering shows its value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 640, 200
LEFT, RIGHT, TOP, BOTTOM = 48, 8, 10, 24


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    css: str  # a class from console.css: s1 … s4
    values: Sequence[float | None]


def _nice_max(value: float) -> float:
    """A top for the y axis whose four grid steps are round numbers
    (1, 2, 2.5 or 5 × 10^n), at or above ``value``; at least 4 for counts."""
    if value <= 0:
        return 4.0
    raw_step = value / 4
    magnitude = 10 ** math.floor(math.log10(raw_step))
    for factor in (1, 2, 2.5, 5, 10):
        step = factor * magnitude
        if step >= raw_step:
            break
    return max(step, 1.0) * 4 if value >= 1 else step * 4


def _fmt(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M".replace(".0M", "M")
    if value >= 1000:
        return f"{value / 1000:.1f}k".replace(".0k", "k")
    if value == int(value):
        return str(int(value))
    return f"{value:.1f}"


def _frame(y_max: float, labels: Sequence[str], unit: str) -> list[str]:
    plot_h = HEIGHT - TOP - BOTTOM
    parts = []
    for i in range(5):
        value = y_max * i / 4
        y = TOP + plot_h - plot_h * i / 4
        parts.append(
            f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="axis" x="{LEFT - 6}" y="{y + 3:.1f}" text-anchor="end">'
            f"{escape(_fmt(value))}{escape(unit)}</text>"
        )
    n = len(labels)
    if n:
        plot_w = WIDTH - LEFT - RIGHT
        every = max(1, n // 6)
        for i in range(0, n, every):
            x = LEFT + plot_w * (i + 0.5) / n
            parts.append(
                f'<text class="axis" x="{x:.1f}" y="{HEIGHT - 6}" text-anchor="middle">'
                f"{escape(labels[i])}</text>"
            )
    return parts


def _svg(parts: list[str], title: str, legend: Sequence[Series]) -> SafeString:
    keys = "".join(
        f'<span class="key"><i class="{escape(s.css)}"></i>{escape(s.name)}</span>' for s in legend
    )
    svg = (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" preserveAspectRatio="none">{"".join(parts)}</svg>'
    )
    return mark_safe(f'<figure class="chart-box">{svg}<figcaption>{keys}</figcaption></figure>')  # noqa: S308


def stacked_bars(
    labels: Sequence[str], series: Sequence[Series], *, title: str, unit: str = ""
) -> SafeString:
    """Bars per label, the series stacked bottom to top."""
    n = len(labels)
    totals = [sum((s.values[i] or 0) for s in series) for i in range(n)]
    y_max = _nice_max(max(totals, default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / max(n, 1)
    bar = max(slot * 0.7, 1.0)
    parts = _frame(y_max, labels, unit)
    for i in range(n):
        x = LEFT + slot * i + (slot - bar) / 2
        base = 0.0
        for s in series:
            value = s.values[i] or 0
            if value <= 0:
                continue
            h = plot_h * value / y_max
            y = TOP + plot_h - plot_h * base / y_max - h
            parts.append(
                f'<rect class="{escape(s.css)}" x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" '
                f'height="{h:.1f}"><title>{escape(labels[i])}: {escape(s.name)} '
                f"{escape(_fmt(value))}{escape(unit)}</title></rect>"
            )
            base += value
    return _svg(parts, title, series)


def lines(
    labels: Sequence[str], series: Sequence[Series], *, title: str, unit: str = ""
) -> SafeString:
    """One line per series; missing values (None) break the line."""
    n = len(labels)
    y_max = _nice_max(max((v for s in series for v in s.values if v is not None), default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    parts = _frame(y_max, labels, unit)
    for s in series:
        path: list[str] = []
        pen_down = False
        for i, value in enumerate(s.values):
            if value is None:
                pen_down = False
                continue
            x = LEFT + plot_w * (i + 0.5) / max(n, 1)
            y = TOP + plot_h - plot_h * value / y_max
            path.append(f"{'L' if pen_down else 'M'}{x:.1f},{y:.1f}")
            pen_down = True
            parts.append(
                f'<circle class="{escape(s.css)}" cx="{x:.1f}" cy="{y:.1f}" r="2.5">'
                f"<title>{escape(labels[i])}: {escape(s.name)} {escape(_fmt(value))}"
                f"{escape(unit)}</title></circle>"
            )
        if path:
            parts.insert(
                len(parts) - len(path), f'<path class="{escape(s.css)}" d="{" ".join(path)}"/>'
            )
    return _svg(parts, title, series)
