"""One read of a memory repository: everything the site and the projection show."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from ..features import notes, sessions, world
from ..features.sessions import SessionRecord
from ..foundation.config import Config, place_of
from ..foundation.decay import activity_boost, decay_factor
from ..foundation.errors import FormatError
from ..foundation.fileformat import decode
from ..foundation.record import Memory, parse_time
from ..storage.reading import duplicate_message, read_memory
from .parsed import Parsed

T = TypeVar("T")


@dataclass(frozen=True)
class Scored:
    """A memory with the parts of its ranking score at the time of the build."""

    memory: Memory
    decay: float
    boost: float

    @property
    def score(self) -> float:
        return self.decay * self.boost


@dataclass
class Snapshot:
    """The repository as the site shows it, at ``now``."""

    config: Config
    now: datetime
    memories: list[Scored] = field(default_factory=list)  # best score first
    sessions: list[SessionRecord] = field(default_factory=list)  # newest first
    world_preamble: str = ""
    world: dict[str, str] = field(default_factory=dict)
    knowledge: dict[str, notes.Knowledge] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)  # memory file (from the repository root) -> id
    problems: list[str] = field(default_factory=list)  # one line per file left out: what is wrong, the fix
    tasks: dict[str, notes.TaskState] = field(default_factory=dict)  # agent -> its task in progress
    # memory id -> what it was read from (Parsed.origins, and recalls not committed yet): the same, the same memory
    origins: dict[str, object] = field(default_factory=dict)
    _current: list[Scored] | None = field(default=None, repr=False)
    _grouped: dict[str, list[Scored]] | None = field(default=None, repr=False)

    @property
    def current(self) -> list[Scored]:
        """The memories still holding at ``now``, best score first: what rankings and counts show (a memory
        superseded by another keeps its page, which links forward)."""
        if self._current is None:
            self._current = [s for s in self.memories if s.memory.valid_at(self.now)]
        return self._current

    def by_category(self) -> dict[str, list[Scored]]:
        """Every configured category (empty ones too), its memories still holding, best first (worked out once:
        the pages read it, none changes it)."""
        if self._grouped is None:
            grouped: dict[str, list[Scored]] = {c.name: [] for c in self.config.categories}
            for scored in self.current:
                grouped.setdefault(scored.memory.category, []).append(scored)
            self._grouped = grouped
        return self._grouped

    def agents(self) -> list[str]:
        names = {s.memory.agent for s in self.memories} | {s.agent for s in self.sessions} | set(self.knowledge)
        return sorted(names)


def load(docs_dir: Path, config: Config, now: datetime,
         pending: dict[str, tuple[int, str]] | None = None) -> Snapshot:
    """Read memories, sessions, world state and agent notes under ``docs_dir``.

    A file that breaks its format is left out and named in ``problems`` (the
    message names file, field and fix), as is a copy of another memory's id:
    one bad file is one problem, never a failed build. ``pending``: recalls
    not committed yet (``pending_counts`` of the activity journal), added to the counts
    in the files as ``memsite show`` adds them.
    """
    pending = pending or {}
    snap = Snapshot(config, now)
    root = docs_dir.parent
    folder = docs_dir / "memories"
    ids: dict[str, str] = {}
    parsed = Parsed(root, config)
    placed: dict[str, bool] = {}  # folder -> whether a memory file may be in it (a few hundred folders)
    for file, under in _markdown_files(folder):
        rel = (f"{config.content_dir}/memories/{under}" if docs_dir.name == config.content_dir
               else _rel(Path(file), root))
        where = under.rpartition("/")[0]
        if where not in placed:
            placed[where] = place_of(under) is not None
        if not placed[where]:  # any layout: <category>/[<YYYY-MM>/[<NNN>/]]<name>.md
            snap.problems.append(f"{rel}: not in a category and month folder; move it to "
                                 f"{config.content_dir}/memories/<category>/<YYYY-MM>/<NNN>/")
            continue
        try:
            memory = parsed.read(file, under, lambda data: read_memory(config, rel, under, data))  # noqa: B023
        except FormatError as exc:
            snap.problems.append(str(exc))
            continue
        assert memory is not None
        if memory.id in ids:
            snap.problems.append(duplicate_message(rel, memory.id, ids[memory.id]))
            continue
        ids[memory.id] = rel
        snap.paths[rel] = memory.id
        snap.origins[memory.id] = (parsed.origins[under], pending.get(memory.id))
        if memory.id in pending:
            memory = _recalled(memory, *pending[memory.id])
        snap.memories.append(Scored(
            memory,
            decay_factor(memory.created, now, config.half_life_days, pinned=memory.pinned),
            activity_boost(memory.active_count, config.active_weight),
        ))
    parsed.save()
    snap.memories.sort(key=lambda s: (-s.score, s.memory.id))
    for path in sorted((docs_dir / "sessions").glob("*.md")):
        record = _parsed(snap, path, root, sessions.parse)
        if record is not None:
            snap.sessions.append(record)
    snap.sessions.sort(key=lambda s: (s.finished, s.name), reverse=True)
    world_file = docs_dir / "world_state.md"
    if world_file.exists():
        snap.world_preamble, snap.world = _parsed(snap, world_file, root, world.parse) or ("", {})
    for path in sorted((docs_dir / "notes").glob("*/agent_knowledge.md")):
        agent = path.parent.name
        knowledge = _parsed(snap, path, root, lambda text, where: notes.parse_knowledge(text, where, agent))  # noqa: B023 (called at once)
        if knowledge is not None:
            snap.knowledge[agent] = knowledge
    for path in sorted((docs_dir / "notes").glob("*/task_process.md")):
        state = _parsed(snap, path, root, notes.parse_process)
        if state is not None:
            snap.tasks[path.parent.name] = state
    return snap


def _markdown_files(folder: Path) -> list[tuple[str, str]]:
    """(path, path under ``folder``) of every ``.md`` file under it, sorted: strings, not a Path per step
    (a hundred thousand memories)."""
    found = []
    for top, _dirs, names in os.walk(folder):
        under = os.path.relpath(top, folder).replace(os.sep, "/")
        prefix = "" if under == "." else under + "/"
        found += [(prefix + name, f"{top}{os.sep}{name}") for name in names if name.endswith(".md")]
    found.sort()
    return [(path, rel) for rel, path in found]


def _recalled(memory: Memory, recalls: int, last: str) -> Memory:
    when: datetime | None
    try:
        when = parse_time(last)
    except ValueError:
        when = memory.last_recalled
    if memory.last_recalled is not None and when is not None:
        when = max(when, memory.last_recalled)
    return memory.replace(active_count=memory.active_count + recalls, last_recalled=when)


def _parsed(snap: Snapshot, path: Path, root: Path, parse: Callable[[str, str], T]) -> T | None:
    """``parse`` of the file; None, with the problem noted, when it breaks its format."""
    try:
        return parse(_read(path, root), _rel(path, root))
    except FormatError as exc:
        snap.problems.append(str(exc))
        return None


def _read(path: Path, root: Path) -> str:
    return decode(path.read_bytes(), _rel(path, root))


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()
