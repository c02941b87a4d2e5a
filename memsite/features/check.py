"""``memsite check``: every invariant of the memory repository, all problems at once."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..foundation import inputs
from ..foundation.config import Config, Place, load_config, place_of
from ..foundation.errors import ConfigError, FormatError, MemsiteError, RepositoryError, SecretFound
from ..foundation.likeness import flagged
from ..foundation.record import Memory
from ..storage.reading import duplicate_message, read_memory
from . import history, notes, sessions, world

WARNINGS_SHOWN = 10  # misplaced files named one by one; the rest are counted


@dataclass
class CheckResult:
    """What ``memsite check`` found (``MemoryStore.check``): problems fail it, warnings do not. One line each."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    count: int = 0  # memory files read
    build_warnings: list[str] = field(default_factory=list)  # code mkdocs.yml adds to the site build (hooks, plugins)


def check_working_tree(root: Path, base: str | None = None) -> CheckResult:
    """Check the memory repository's files on disk under ``root``.

    Args:
        base: a revision; session records that existed there must be unchanged.

    Returns:
        One line per problem and per warning, the number of memory files read, and what ``mkdocs.yml`` adds
        to the site build.
    """
    from .site_guard import build_problems, config_warnings

    added = config_warnings(root)
    try:
        config = load_config(root)
    except ConfigError as exc:
        return CheckResult(build_problems(root, None) + str(exc).splitlines(), build_warnings=added)
    problems = build_problems(root, config.content_dir) + _world(root, config) + _records(root, config)
    if base is not None:
        unknown = _not_a_commit(root, base)
        problems += [unknown] if unknown else _sessions_since(root, config, base) + _memories_since(root, config, base)
    memory_problems, misplaced, count, flags = _memories(root, config)
    return CheckResult(problems + memory_problems,
                       _misplaced_warnings(misplaced + _archive(root, config)) + flags + _world_conflicts(root, base),
                       count, added)


def _world_conflicts(root: Path, base: str | None) -> list[str]:
    """A warning per world key a merge found set two ways (since ``base``; else the latest ones): the value
    written last was kept, and a person may want the other."""
    try:
        found = history.world_conflicts(root, f"{base}..HEAD" if base else "HEAD")
    except MemsiteError:
        return []  # (no commits yet)
    warnings = [f"world key {line.replace(': kept ', ' was set two ways: kept ', 1)} "
                f"(merge {sha[:12]}, {when:%Y-%m-%d %H:%M}); 'memsite world set' changes it"
                for sha, when, line in found[:WARNINGS_SHOWN]]
    if len(found) > WARNINGS_SHOWN:
        warnings.append(f"and {len(found) - WARNINGS_SHOWN} more world keys set two ways"
                        + (f" since {base}" if base else "") + " (git log --grep=World-Conflict)")
    return warnings


def _memories(root: Path, config: Config) -> tuple[list[str], list[str], int, list[str]]:
    """(problems, files in the wrong place, memory files read, possible contradictions to review)."""
    folder = root / config.memories_dir
    problems: list[str] = []
    misplaced: list[str] = []
    memories: list[tuple[str, Memory]] = []
    for path in sorted(folder.rglob("*.md")) if folder.is_dir() else []:
        rel = path.relative_to(root).as_posix()
        place = place_of(path.relative_to(folder).as_posix())
        if place is None:
            problems.append(f"{rel}: not in a category and month folder; "
                            f"move it to {config.memories_dir}/<category>/<YYYY-MM>/<NNN>/")
            continue
        try:
            memory = read_memory(config, rel, path.relative_to(folder).as_posix(), path.read_bytes())
            assert memory is not None  # it is in a category folder
            memories.append((rel, memory))
            inputs.no_secrets({"content": memory.content, "abstract": memory.abstract, "overview": memory.overview})
        except SecretFound as exc:
            problems.append(f"{rel}: {str(exc).replace('; nothing was written', '')}")
            continue
        except FormatError as exc:
            problems.append(str(exc))
            continue
        home = config.memory_folder(config.category(memory.category), memory.created)
        if not_home := _not_home(rel, place, home):
            misplaced.append(not_home)
    problems += _duplicate_ids(memories)
    problems += _capacities(config, [m for _, m in memories])
    return problems, misplaced, len(memories), _contradictions(memories)


def _contradictions(memories: list[tuple[str, Memory]]) -> list[str]:
    """One line per flag a memory carries that it may contradict another.

    See :mod:`memsite.features.contradictions`."""
    by_id = {memory.id: memory for _, memory in memories}
    lines = []
    for rel, memory in memories:
        for old in flagged(memory):
            other = by_id.get(old)
            said = f" ({_short(other.abstract)})" if other is not None else " (no longer in memory)"
            lines.append(f"{rel}: possible contradiction: {memory.id} ({_short(memory.abstract)}) may replace "
                         f"{old}{said}; confirm with 'memsite supersede {old} {memory.id}' or dismiss with "
                         f"'memsite dismiss {memory.id} {old}'")
    return lines


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:59] + "…"


def _archive(root: Path, config: Config) -> list[str]:
    """Archived memory files not in a numbered folder of the month they were created in.

    One of the flat layout that cannot be read is named with what to fix first
    (its month is unknown, so 'memsite migrate' stops at it); one in a month
    folder is left alone.
    """
    folder, misplaced = root / config.archive_dir, []
    for path in sorted(folder.rglob("*.md")) if folder.is_dir() else []:
        rel, under = path.relative_to(root).as_posix(), path.relative_to(folder).as_posix()
        place = place_of(under)
        if place is None:
            continue
        try:
            memory = read_memory(config, rel, under, path.read_bytes())
        except FormatError as exc:
            if place.month is None:
                misplaced.append(f"{exc}; 'memsite migrate' moves this archived memory once it can be read")
            continue
        assert memory is not None  # it is in a category folder
        home = config.memory_folder(config.category(memory.category), memory.created, archived=True)
        if not_home := _not_home(rel, place, home, archived=True):
            misplaced.append(not_home)
    return misplaced


def _not_home(rel: str, place: Place, home: str, *, archived: bool = False) -> str | None:
    """Why the memory file ``rel`` (at ``place``) is not in a numbered folder of its month folder ``home``."""
    month = home.rsplit("/", 1)[1]
    kept = "archived " if archived else ""
    fix = f"'memsite migrate' moves it into a numbered folder of {home}/"
    if place.month is None:
        return f"{rel}: {kept}in the flat layout; {fix}"
    if place.month != month:
        return f"{rel}: {kept}in the month folder {place.month}, but created in {month}; {fix}"
    if place.segment is None:
        return f"{rel}: {kept}in the month layout, without a numbered folder; {fix}"
    return None


def _misplaced_warnings(misplaced: list[str]) -> list[str]:
    """The first few files in the wrong place by name, then how many more (a large store has thousands)."""
    warnings = misplaced[:WARNINGS_SHOWN]
    if len(misplaced) > WARNINGS_SHOWN:
        warnings.append(f"... and {len(misplaced) - WARNINGS_SHOWN} more memory files in the wrong place; "
                        "run 'memsite migrate' to move them all in one commit")
    return warnings


def _world(root: Path, config: Config) -> list[str]:
    path = root / config.world_path
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8", errors="replace")
    problems = [f"{config.world_path}: line {n}: merge conflict marker; resolve the conflict and commit"
                for n in world.conflict_lines(text)]
    try:
        world.parse(text, config.world_path)
    except FormatError as exc:
        problems.append(str(exc))
    return problems


def _records(root: Path, config: Config) -> list[str]:
    """Session records and agent notes must read back."""
    problems = []
    sessions_dir = root / config.sessions_dir
    for path in sorted(sessions_dir.glob("*.md")) if sessions_dir.is_dir() else []:
        rel = path.relative_to(root).as_posix()
        try:
            sessions.parse(path.read_text(encoding="utf-8"), rel)
        except (FormatError, UnicodeDecodeError) as exc:
            problems.append(str(exc) if isinstance(exc, FormatError) else f"{rel}: not valid UTF-8")
    notes_dir = root / config.content_dir / "notes"
    for path in sorted(notes_dir.glob("*/*.md")) if notes_dir.is_dir() else []:
        rel = path.relative_to(root).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
            if path.name == "agent_knowledge.md":
                notes.parse_knowledge(text, rel, path.parent.name)
            elif path.name == "task_process.md":
                notes.parse_process(text, rel)
        except (FormatError, UnicodeDecodeError) as exc:
            problems.append(str(exc) if isinstance(exc, FormatError) else f"{rel}: not valid UTF-8")
    return problems


def _not_a_commit(root: Path, base: str) -> str | None:
    """Why ``base`` names no commit (one line, said once for every check made since it), or None."""
    from ..git import Repository

    repo = Repository(root)
    try:
        repo.resolve(base)
    except RepositoryError as exc:
        return str(exc)
    finally:
        repo.close()
    return None


def _sessions_since(root: Path, config: Config, base: str) -> list[str]:
    """Session records are append-only: each one at ``base`` is still here, byte for byte."""
    from ..git import Repository

    repo = Repository(root)
    try:
        commit = repo.resolve(base)
        before = repo.files_under(commit, config.sessions_dir)
    except RepositoryError as exc:
        return [str(exc)]
    finally:
        repo.close()
    problems = []
    for rel, data in sorted(before.items()):
        path = root / rel
        if not path.exists():
            problems.append(f"{rel}: session record deleted since {base}; the event log is append-only "
                            f"(restore it: git checkout {base} -- {rel})")
        elif path.read_bytes() != data:
            problems.append(f"{rel}: session record changed since {base}; the event log is append-only "
                            f"(restore it: git checkout {base} -- {rel})")
    return problems


def _memories_since(root: Path, config: Config, base: str) -> list[str]:
    """Since ``base``: no memory gone without a forget or trim record, no id given out twice."""
    from .review import compare, ids_used_before

    try:
        report = compare(root, base, "HEAD", strict=False)
        used = ids_used_before(root, base, config.content_dir)
    except MemsiteError as exc:
        return [str(exc)]
    problems = [f"{c.path}: memory {c.id} deleted since {base} without a forget or trim record; restore it "
                f"(git checkout {base} -- {c.path}) or remove it with 'memsite forget {c.id} --reason ...'"
                for c in report.changes if c.action == "deleted"]
    problems += [f"{c.path}: field 'id': {c.id} was used by an earlier memory (before {base}); ids are never "
                 "reused: give this memory a new id" for c in report.changes if c.action == "created" and c.id in used]
    return problems


def _duplicate_ids(memories: list[tuple[str, Memory]]) -> list[str]:
    first: dict[str, str] = {}
    problems = []
    for rel, memory in memories:
        if memory.id in first:
            problems.append(duplicate_message(rel, memory.id, first[memory.id]))
        else:
            first[memory.id] = rel
    return problems


def _capacities(config: Config, memories: list[Memory]) -> list[str]:
    problems = []
    for category in config.categories:
        members = [m for m in memories if m.category == category.name]
        measures = {"entries": len(members), "lines": sum(m.lines for m in members)}
        for unit in ("entries", "lines"):
            mark = getattr(category.capacity, unit)
            if mark is not None and measures[unit] > mark.high:
                where = os.path.join(config.content_dir, "memories", category.folder)
                problems.append(f"{where}: {measures[unit]} {unit}, over the capacity of {mark.high}; "
                                f"run 'memsite trim {category.name}'")
    return problems
