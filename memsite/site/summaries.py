"""Daily summaries and category projections, in the original spec's shapes.

The same functions render the site's ``/summaries/`` pages and the files of
``memsite project`` (for external Markdown indexers). They take the text
escaper and the memory-link maker of their target, so the site escapes
untrusted text and links memories while the projection stays plain Markdown.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, timedelta

from .snapshot import Scored, Snapshot

Escape = Callable[[object], str]
LinkTo = Callable[[Scored], str]  # the Markdown (or HTML) to show for one memory


@dataclass(frozen=True)
class Day:
    """What a daily summary shows for one day."""

    day: date
    total: int  # memories that existed by the end of the day
    new: tuple[Scored, ...]  # created that day, in order
    new_before: int  # created the day before
    by_category: dict[str, int]
    top: tuple[Scored, ...]  # most recalled of those existing by then, at most 5
    sessions: int  # closed that day


def days(snap: Snapshot) -> list[Day]:
    """A summary for every day with activity (memories created or updated, sessions closed), newest first.

    One pass in date order: totals, category counts and the top five are
    carried from day to day, not recounted.
    """
    active: set[date] = set()
    created: dict[date, list[Scored]] = {}
    for scored in snap.memories:
        created.setdefault(scored.memory.created.date(), []).append(scored)
        active.add(scored.memory.updated.date())
    closed = Counter(s.finished.date() for s in snap.sessions)
    active.update(created, closed)
    result = []
    total, by_category, top = 0, Counter(), []
    for day in sorted(active):
        new = sorted(created.get(day, ()), key=lambda s: (s.memory.created, s.memory.id))
        total += len(new)
        by_category.update(s.memory.category for s in new)
        top = heapq.nsmallest(5, [*top, *new], key=lambda s: (-s.memory.active_count, s.memory.id))
        result.append(Day(day, total, tuple(new), len(created.get(day - timedelta(days=1), ())), dict(by_category),
                          tuple(top), closed[day]))
    return result[::-1]


def daily_summary(snap: Snapshot, day: Day, esc: Escape, show: LinkTo) -> str:
    """The summary of one day: totals, new that day and the day before, by category, that day's new, top 5."""
    lines = [
        f"# Daily summary {day.day.isoformat()}", "",
        "## Totals", "",
        f"- Memories: {day.total}",
        f"- New this day: {len(day.new)}",
        f"- New the day before: {day.new_before}",
        f"- Sessions closed: {day.sessions}", "",
        "## By category", "",
        *[f"- {esc(c.name)}: {day.by_category.get(c.name, 0)}" for c in snap.config.categories], "",
        "## New this day", "",
        *([f"- \\[{esc(s.memory.category)}\\] {show(s)}" for s in day.new] or ["(none)"]), "",
        "## Most recalled (top 5)", "",
        *([f"- \\[{esc(s.memory.category)}\\] {show(s)} ({s.memory.active_count}x)" for s in day.top
           if s.memory.active_count] or ["(none recalled yet)"]), "",
    ]
    return "\n".join(lines)


def category_projection(name: str, description: str, members: Iterable[Scored], esc: Escape,
                        *, include_l1: bool = True, updated: str = "") -> str:
    """One category as Markdown: each memory's abstract (L0), overview (L1), created, recalls, source."""
    members = list(members)
    lines = [f"# {esc(name)}", "", f"> {esc(description)}", ""]
    if updated:
        lines.append(f"> Updated: {updated}")
    lines += [f"> Memories: {len(members)}", "", "---", ""]
    for s in members:
        m = s.memory
        lines += [f"## {m.id}", "", f"**Abstract**: {esc(m.abstract)}", ""]
        if include_l1 and m.overview:
            lines += [f"**Overview**: {esc(m.overview)}", ""]
        lines += [f"- Created: {m.created.date().isoformat()}", f"- Recalled: {m.active_count} times",
                  f"- Source: {esc(m.source or 'unknown')}", f"- Agent: {esc(m.agent)}", "", "---", ""]
    return "\n".join(lines)
