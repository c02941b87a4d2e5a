"""Daily summaries and category projections, in the original spec's shapes.

The same functions render the site's ``/summaries/`` pages and the files of
``memsite project`` (for external Markdown indexers). They take the text
escaper and the memory-link maker of their target, so the site escapes
untrusted text and links memories while the projection stays plain Markdown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from datetime import date, timedelta

from .snapshot import Scored, Snapshot

Escape = Callable[[object], str]
LinkTo = Callable[[Scored], str]  # the Markdown (or HTML) to show for one memory


def active_days(snap: Snapshot) -> list[date]:
    """Days with activity (memories created or updated, sessions closed), newest first."""
    days: set[date] = set()
    for scored in snap.memories:
        days.add(scored.memory.created.date())
        days.add(scored.memory.updated.date())
    days.update(s.finished.date() for s in snap.sessions)
    return sorted(days, reverse=True)


def day_counts(snap: Snapshot, day: date) -> tuple[int, int, int]:
    """(memories that existed by the end of ``day``, new that day, new the day before)."""
    created = Counter(s.memory.created.date() for s in snap.memories)
    total = sum(n for d, n in created.items() if d <= day)
    return total, created[day], created[day - timedelta(days=1)]


def daily_summary(snap: Snapshot, day: date, esc: Escape, show: LinkTo) -> str:
    """The summary of ``day``: totals, new that day and the day before, by category, that day's new, top 5."""
    existing = [s for s in snap.memories if s.memory.created.date() <= day]
    total, new_today, new_before = day_counts(snap, day)
    by_category = Counter(s.memory.category for s in existing)
    new = sorted((s for s in existing if s.memory.created.date() == day), key=lambda s: s.memory.created)
    top = sorted(existing, key=lambda s: (-s.memory.active_count, s.memory.id))[:5]
    sessions = [s for s in snap.sessions if s.finished.date() == day]
    lines = [
        f"# Daily summary {day.isoformat()}", "",
        "## Totals", "",
        f"- Memories: {total}",
        f"- New this day: {new_today}",
        f"- New the day before: {new_before}",
        f"- Sessions closed: {len(sessions)}", "",
        "## By category", "",
        *[f"- {esc(c.name)}: {by_category.get(c.name, 0)}" for c in snap.config.categories], "",
        "## New this day", "",
        *([f"- \\[{esc(s.memory.category)}\\] {show(s)}" for s in new] or ["(none)"]), "",
        "## Most recalled (top 5)", "",
        *([f"- \\[{esc(s.memory.category)}\\] {show(s)} ({s.memory.active_count}x)" for s in top
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
