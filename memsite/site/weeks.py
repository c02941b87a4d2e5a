"""What happened in a span of days, from the history: the home page's "This week" and one page per ISO week.

A :class:`Digest` answers a team lead's Monday questions about a window of
time: what the agents learned (new memories by category, task learnings,
skill drafts), what changed in the world state, what was forgotten or trimmed
and why, and who did what. It is computed from the commits of the branch the
site is built from (their trailers name each memory, action and reason), so a
past week's page reads the same whenever it is built.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from ..features import history, world
from ..features.history import Commit
from ..features.sessions import SessionRecord
from ..features.skills import SkillCandidate
from ..foundation.errors import FormatError
from ..foundation.likeness import flagged
from ..foundation.record import Memory
from .snapshot import Scored, Snapshot

AGENT_COLUMNS = ("created", "merged", "updated", "forgotten", "trimmed")


@dataclass
class Digest:
    """What happened from ``start`` (inclusive) to ``end`` (exclusive), both UTC."""

    start: datetime
    end: datetime
    new: list[Scored] = field(default_factory=list)  # created in the window and still in memory, newest first
    sessions: list[SessionRecord] = field(default_factory=list)  # closed in the window, newest first
    skills: list[SkillCandidate] = field(default_factory=list)  # drafts whose pattern was written in the window
    world: list[tuple[str, str, str]] = field(default_factory=list)  # (key, added|changed|removed, value)
    conflicts: list[tuple[str, datetime, str]] = field(default_factory=list)  # (merge, when, a key set two ways)
    removed: list[tuple[Commit, str, str, str]] = field(default_factory=list)  # (commit, id, action, reason)
    agents: dict[str, Counter] = field(default_factory=dict)  # agent -> created, merged, ..., recalls, sessions
    changed: list[tuple[Memory, Memory | None]] = field(default_factory=list)  # (superseded, successor), newest first
    review: list[Scored] = field(default_factory=list)  # new in the window and flagged as possible contradictions
    commits: int = 0

    @property
    def empty(self) -> bool:
        return not (self.commits or self.new or self.sessions)

    def by_category(self) -> dict[str, list[Scored]]:
        grouped: dict[str, list[Scored]] = {}
        for scored in self.new:
            grouped.setdefault(scored.memory.category, []).append(scored)
        return grouped


class Timeline:
    """Memories, sessions and commits bucketed by day, so a digest of a few days costs those days only."""

    def __init__(self, snap: Snapshot, commits: list[Commit], skills: list[SkillCandidate],
                 world_at: dict[str, dict[str, str]], conflicts: Sequence[tuple[str, datetime, str]] = ()) -> None:
        self.snap, self.commits, self.skills, self.world_at = snap, commits, skills, world_at
        self.conflicts = list(conflicts)
        self.created: dict[date, list[Scored]] = {}
        self.written: dict[date, set[str]] = {}
        self.replaced: dict[date, list[Memory]] = {}  # memories superseded, by the day they stopped holding
        self.by_id = {s.memory.id: s.memory for s in snap.memories}
        for s in snap.memories:
            if s.memory.valid_until is not None and s.memory.superseded_by is not None:
                self.replaced.setdefault(s.memory.valid_until.date(), []).append(s.memory)
            self.created.setdefault(s.memory.created.date(), []).append(s)
            for when in (s.memory.created, s.memory.updated):
                self.written.setdefault(when.date(), set()).add(s.memory.id)
        self.closed: dict[date, list[SessionRecord]] = {}
        for r in snap.sessions:
            self.closed.setdefault(r.finished.date(), []).append(r)
        self.by_day: dict[date, list[Commit]] = {}
        for c in commits:
            self.by_day.setdefault(c.when.date(), []).append(c)
        self.world_commits = [c for c in commits if c.sha in world_at]
        self.days = sorted(set(self.created) | set(self.closed) | set(self.by_day) | set(self.replaced))
        for members in self.created.values():  # newest first, as digests list them: sorted once, not per digest
            members.sort(key=lambda s: (s.memory.created, s.memory.id), reverse=True)

    def digest(self, start: datetime, end: datetime) -> Digest:
        """The digest of ``[start, end)``."""
        d = Digest(start, end)
        days = [day for day in self.days if start.date() <= day <= end.date()]
        inside = [c for day in days for c in self.by_day.get(day, ()) if start <= c.when < end]
        d.commits = len(inside)
        d.new = [s for day in reversed(days) for s in self.created.get(day, ()) if start <= s.memory.created < end]
        d.sessions = sorted((r for day in days for r in self.closed.get(day, ()) if start <= r.finished < end),
                            key=lambda r: (r.finished, r.name), reverse=True)
        changed = sorted((m for day in days for m in self.replaced.get(day, ())
                          if start <= m.valid_until < end), key=lambda m: (m.valid_until, m.id), reverse=True)  # type: ignore[operator]  # replaced: valid_until set
        d.changed = [(m, self.by_id.get(m.superseded_by or "")) for m in changed]
        d.review = [s for s in d.new if flagged(s.memory)]
        written = set().union(*(self.written.get(day, set()) for day in days))
        d.skills = [c for c in self.skills if c.source_pattern_id in written]
        sessions_dir = self.snap.config.sessions_dir + "/"
        for c in inside:
            agent = d.agents.setdefault(c.author, Counter())
            for mid, action, reason in c.actions:
                if action in AGENT_COLUMNS:
                    agent[action] += 1
                if action in ("forgotten", "trimmed"):
                    d.removed.append((c, mid, action, reason))
            agent["recalls"] += sum(n for _, n in c.recalls)
            agent["sessions"] += sum(1 for status, path in c.files
                                     if status == "A" and path.startswith(sessions_dir))
        d.removed.reverse()  # newest first
        d.conflicts = [found for found in self.conflicts if start <= found[1] < end]
        before = [c for c in self.world_commits if c.when < start]
        last = [c for c in self.world_commits if start <= c.when < end]
        if last:
            old = self.world_at[before[-1].sha] if before else {}
            new = self.world_at[last[-1].sha]
            d.world = sorted([(k, "added", new[k]) for k in new if k not in old]
                             + [(k, "changed", new[k]) for k in new if k in old and old[k] != new[k]]
                             + [(k, "removed", old[k]) for k in old if k not in new])
        return d


def world_history(root: Path, commits: list[Commit], path: str) -> dict[str, dict[str, str]]:
    """The world state after each commit that changed ``path`` (commit id -> key -> value), one ``git cat-file``."""
    changed = [c for c in commits if any(p == path for _, p in c.files)]
    found = history.read_files(root, [f"{c.sha}:{path}" for c in changed])
    states = {}
    for commit, data in zip(changed, found):
        try:
            states[commit.sha] = world.parse(data.decode("utf-8", "replace"))[1] if data else {}
        except FormatError:  # a world file a hand edit broke: that commit shows no change
            continue
    return states


def gone_memories(root: Path, commits: list[Commit], memories_dir: str,
                  read: Callable[[str, bytes], Memory | None]) -> dict[str, Memory]:
    """The memories forgotten or trimmed, as they were before (id -> memory), to name them by their abstract.

    ``read(path, data)`` parses a memory file (None or an exception for what is not one).
    """
    removed = history.removed_files(commits, memories_dir)
    found = history.read_files(root, [f"{c.sha}^:{path}" for c, path in removed])
    gone = {}
    for (_, path), data in zip(removed, found):
        if data is None:
            continue
        try:
            memory = read(path, data)
        except FormatError:  # a file that broke the format before it went: named by its id only
            continue
        if memory is not None:
            gone[memory.id] = memory
    return gone


def iso_week(day: date) -> str:
    """``2026-W47``: the ISO week ``day`` falls in."""
    year, week, _ = day.isocalendar()
    return f"{year}-W{week:02d}"


def week_span(name: str) -> tuple[datetime, datetime]:
    """The first moment of the ISO week ``name`` and of the week after it (UTC)."""
    year, week = name.split("-W")
    monday = date.fromisocalendar(int(year), int(week), 1)
    start = datetime(monday.year, monday.month, monday.day, tzinfo=UTC)
    return start, start + timedelta(days=7)


def weeks(timeline: Timeline) -> list[str]:
    """Every ISO week with a commit, a memory created or a session closed, newest first."""
    return sorted({iso_week(d) for d in timeline.days}, reverse=True)
