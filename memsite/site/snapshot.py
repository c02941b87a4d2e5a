"""One read of a memory repository: everything the site and the projection show."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .. import notes, sessions, world
from ..config import Config
from ..errors import FormatError
from ..fileformat import decode, parse_memory
from ..model import Memory
from ..ranking import activity_boost, decay_factor
from ..sessions import SessionRecord


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
    tasks: dict[str, notes.TaskState] = field(default_factory=dict)  # agent -> its task in progress

    def by_category(self) -> dict[str, list[Scored]]:
        """Every configured category (empty ones too), its memories best first."""
        grouped: dict[str, list[Scored]] = {c.name: [] for c in self.config.categories}
        for scored in self.memories:
            grouped.setdefault(scored.memory.category, []).append(scored)
        return grouped

    def agents(self) -> list[str]:
        names = {s.memory.agent for s in self.memories} | {s.agent for s in self.sessions} | set(self.knowledge)
        return sorted(names)


def load(docs_dir: Path, config: Config, now: datetime) -> Snapshot:
    """Read memories, sessions, world state and agent notes under ``docs_dir``.

    Raises:
        FormatError: a file breaks its format (the message names file, field and fix).
    """
    snap = Snapshot(config, now)
    root = docs_dir.parent
    folder = docs_dir / "memories"
    for path in sorted(folder.rglob("*.md")) if folder.is_dir() else []:
        parts = path.relative_to(folder).parts
        category = config.by_folder(parts[0]) if len(parts) == 2 else None
        if category is None:
            raise FormatError(f"{_rel(path, root)}: not in a configured category folder; move it to "
                              f"{config.content_dir}/memories/<category>/ or add the category to mkdocs.yml")
        memory = parse_memory(_read(path, root), _rel(path, root), category=category.name)
        snap.paths[_rel(path, root)] = memory.id
        snap.memories.append(Scored(
            memory,
            decay_factor(memory.created, now, config.half_life_days, pinned=memory.pinned),
            activity_boost(memory.active_count, config.active_weight),
        ))
    snap.memories.sort(key=lambda s: (-s.score, s.memory.id))
    for path in sorted((docs_dir / "sessions").glob("*.md")):
        snap.sessions.append(sessions.parse(_read(path, root), _rel(path, root)))
    snap.sessions.sort(key=lambda s: (s.finished, s.name), reverse=True)
    world_file = docs_dir / "world_state.md"
    if world_file.exists():
        snap.world_preamble, snap.world = world.parse(_read(world_file, root), _rel(world_file, root))
    for path in sorted((docs_dir / "notes").glob("*/agent_knowledge.md")):
        agent = path.parent.name
        snap.knowledge[agent] = notes.parse_knowledge(_read(path, root), _rel(path, root), agent)
    for path in sorted((docs_dir / "notes").glob("*/task_process.md")):
        state = notes.parse_process(_read(path, root), _rel(path, root))
        if state is not None:
            snap.tasks[path.parent.name] = state
    return snap


def _read(path: Path, root: Path) -> str:
    return decode(path.read_bytes(), _rel(path, root))


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()
