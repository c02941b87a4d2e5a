"""Charts drawn at build time (HTML bars, an inline SVG line): no JavaScript, no request to anyone.

Labels are page text in the page's own font size, so a phone reads them as
well as a desktop (an SVG scaled to a 375 px screen shrinks its text to ~5 px).
"""

from __future__ import annotations

from datetime import date

from .safe import text

WIDTH = 640


def bars(rows: list[tuple[str, int]], title: str) -> str:
    """A horizontal bar chart of (label, value) rows, as HTML: label, bar, value."""
    most = max((v for _, v in rows), default=0) or 1
    cells = "".join(f'<span>{text(label)}</span><span class="bar"><span style="width:{80 * value / most:.1f}%">'
                    f"</span>{value}</span>" for label, value in rows)
    return f'<div class="memsite-bars" role="img" aria-label="{text(title)}">{cells}</div>'


def timeline(points: list[tuple[date, int]], title: str) -> str:
    """A filled line chart of a count over days (cumulative totals, say)."""
    height, left, bottom, top = 200, 44, 24, 10
    if not points:
        return f'<p class="memsite-empty">{text(title)}: nothing yet.</p>'
    if len(points) == 1:  # a line needs two days: say it instead of drawing an empty frame
        day, value = points[0]
        return f'<p class="memsite-empty">{text(title)}: {value} on {day.isoformat()}, the only day so far.</p>'
    first, last = points[0][0], points[-1][0]
    span = max(1, (last - first).days)
    most = max(v for _, v in points) or 1

    def xy(day: date, value: int) -> tuple[float, float]:
        x = left + (WIDTH - left - 10) * (day - first).days / span
        y = top + (height - top - bottom) * (1 - value / most)
        return round(x, 1), round(y, 1)

    line = " ".join(f"{x},{y}" for x, y in (xy(d, v) for d, v in points))
    x0, base = xy(first, 0)
    x1, _ = xy(last, 0)
    return (f'<svg class="memsite-chart" role="img" aria-label="{text(title)}" viewBox="0 0 {WIDTH} {height}" '
            f'width="100%" xmlns="http://www.w3.org/2000/svg"><title>{text(title)}</title>'
            f'<polygon class="area" points="{x0},{base} {line} {x1},{base}"/>'
            f'<polyline class="line" points="{line}" fill="none"/>'
            f'<text x="{left - 6}" y="{top + 8}" text-anchor="end">{most}</text>'
            f'<text x="{left - 6}" y="{base}" text-anchor="end">0</text>'
            f'<text x="{left}" y="{height - 6}">{first.isoformat()}</text>'
            f'<text x="{WIDTH - 10}" y="{height - 6}" text-anchor="end">{last.isoformat()}</text></svg>')
