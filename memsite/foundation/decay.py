"""Decay ranking and capacity planning: pure functions over plain values.

score = relevance x 2^(-age_days / half_life_days) x (1 + active_weight x ln(1 + active_count))

A new memory keeps its whole score, one 30 days old half, one 60 days old a
quarter (with the default half-life); recalls lift it; pinned memories do not
decay. With no query the relevance is 1, and the score is the site's ranking
and the order in which trimming lets memories go.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from .config import Capacity


def decay_factor(created: datetime, now: datetime, half_life_days: float = 30.0, *, pinned: bool = False) -> float:
    """2^(-age/half-life); 1.0 for pinned memories and for dates in the future."""
    if pinned:
        return 1.0
    age_days = max(0.0, (now - created).total_seconds() / 86400.0)
    return 2.0 ** (-age_days / half_life_days)


def activity_boost(active_count: int, active_weight: float = 0.1) -> float:
    """1 + active_weight x ln(1 + active_count)."""
    return 1.0 + active_weight * math.log1p(max(0, active_count))


def decay_score(
    relevance: float,
    created: datetime,
    active_count: int,
    now: datetime,
    half_life_days: float = 30.0,
    active_weight: float = 0.1,
    *,
    pinned: bool = False,
) -> float:
    """The ranking score of a memory.

    Args:
        relevance: how well it matches the query, in (0, 1]; 1 with no query.
        created: when it was created (timezone-aware).
        active_count: how many times it has been recalled.
        now: the time to score at.
        half_life_days: days for the decay factor to halve.
        active_weight: weight of recalls in the boost.
        pinned: pinned memories do not decay.

    Returns:
        relevance x decay x boost.
    """
    return (
        relevance
        * decay_factor(created, now, half_life_days, pinned=pinned)
        * activity_boost(active_count, active_weight)
    )


@dataclass(frozen=True)
class TrimCandidate:
    """What trimming needs to know about one memory of a category."""

    id: str
    created: datetime
    active_count: int
    pinned: bool
    lines: int


def plan_trim(
    members: Sequence[TrimCandidate],
    capacity: Capacity,
    now: datetime,
    half_life_days: float = 30.0,
    active_weight: float = 0.1,
) -> list[str]:
    """Ids to trim so the category is back under its low marks.

    Nothing is trimmed unless a high mark is exceeded. Then the lowest-scored
    unpinned memories go first (so with equal activity the oldest go first and
    the most recent are kept) until every measure is at or below its low mark.
    Pinned memories count toward the measures but are never trimmed.
    """
    entries = len(members)
    lines = sum(m.lines for m in members)
    over = (capacity.entries is not None and entries > capacity.entries.high) or (
        capacity.lines is not None and lines > capacity.lines.high
    )
    if not over:
        return []

    def within_low() -> bool:
        return (capacity.entries is None or entries <= capacity.entries.low) and (
            capacity.lines is None or lines <= capacity.lines.low
        )

    order = sorted(
        (m for m in members if not m.pinned),
        key=lambda m: (decay_score(1.0, m.created, m.active_count, now, half_life_days, active_weight),
                       m.created, m.id),
    )
    trimmed: list[str] = []
    for member in order:
        if within_low():
            break
        trimmed.append(member.id)
        entries -= 1
        lines -= member.lines
    return trimmed
