"""Daily summaries and category projections, in the shapes of the memory-plugin specification (docs/design.md).

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
    """What a daily summary shows for one day, as it stood at the end of that day."""

    day: date
    total: int  # memories that existed by the end of the day
    new: tuple[Scored, ...]  # created that day, in order
    new_before: int  # created the day before
    by_category: dict[str, int]
    top: tuple[tuple[Scored, int], ...]  # most recalled by the end of the day, with that day's count; at most 5
    sessions: int  # closed that day


Recall = tuple[date, str, int]  # (day, memory id, recalls added that day), from the commit trailers
Removal = tuple[date, date, str]  # (day created, day forgotten or trimmed, category) of a memory gone since


def days(snap: Snapshot, recalls: Iterable[Recall] = (), removed: Iterable[Removal] = ()) -> list[Day]:
    """A summary for every day with activity (memories created, updated or removed, recalls, sessions closed),
    newest first.

    Each day shows the state at its end, so a past day's summary is the same
    whenever it is built: recall counts are today's less what the history
    added after that day; totals and category counts include the memories
    that existed then and were forgotten or trimmed since. One pass in date
    order: totals, category counts and the top five are carried from day to
    day, not recounted (counts only grow, so only memories new or recalled
    that day can enter the top five).
    """
    active: set[date] = set()
    created: dict[date, list[Scored]] = {}
    by_id = {s.memory.id: s for s in snap.memories}
    for scored in snap.memories:
        created.setdefault(scored.memory.created.date(), []).append(scored)
        active.add(scored.memory.updated.date())
    added: dict[date, Counter] = {}
    count = Counter({mid: s.memory.active_count for mid, s in by_id.items()})
    for day, mid, n in recalls:
        if mid in by_id:
            added.setdefault(day, Counter())[mid] += n
            count[mid] -= n  # back to the count before any recorded recall
    closed = Counter(s.finished.date() for s in snap.sessions)
    born: dict[date, Counter] = {}  # categories of memories created on a day and gone since
    died: dict[date, Counter] = {}
    for start, end, category in removed:
        born.setdefault(start, Counter())[category] += 1
        died.setdefault(end, Counter())[category] += 1
    active.update(created, closed, added, born, died)
    result = []
    total, by_category, top, existing = 0, Counter[str](), list[Scored](), set[str]()
    for day in sorted(active):
        new = sorted(created.get(day, ()), key=lambda s: (s.memory.created, s.memory.id))
        total += len(new) + sum(born.get(day, Counter()).values()) - sum(died.get(day, Counter()).values())
        by_category.update(s.memory.category for s in new)
        by_category.update(born.get(day, Counter()))
        by_category.subtract(died.get(day, Counter()))
        existing.update(s.memory.id for s in new)
        count.update(added.get(day, {}))
        moved = [by_id[mid] for mid in added.get(day, {}) if mid in existing]
        candidates = {s.memory.id: s for s in [*top, *new, *moved]}.values()
        top = heapq.nsmallest(5, candidates, key=lambda s: (-count[s.memory.id], s.memory.id))
        result.append(Day(day, total, tuple(new), len(created.get(day - timedelta(days=1), ())), dict(by_category),
                          tuple((s, max(0, count[s.memory.id])) for s in top), closed[day]))
    return result[::-1]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


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
        *([f"- \\[{esc(s.memory.category)}\\] {show(s)} ({_plural(n, 'recall')} by this day)" for s, n in day.top
           if n] or ["(none recalled yet)"]), "",
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
