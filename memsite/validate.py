"""``memsite check``: every invariant of the memory files, all problems at once."""

from __future__ import annotations

import os
from pathlib import Path

from .config import Config, load_config
from .errors import ConfigError, FormatError
from .fileformat import parse_memory
from .model import Memory


def check_working_tree(root: Path) -> tuple[list[str], int]:
    """Check the memory files on disk under ``root``.

    Returns:
        (one line per problem, number of memory files read)
    """
    try:
        config = load_config(root)
    except ConfigError as exc:
        return str(exc).splitlines(), 0
    folder = root / config.content_dir / "memories"
    problems: list[str] = []
    memories: list[tuple[str, Memory]] = []
    for path in sorted(folder.rglob("*.md")) if folder.is_dir() else []:
        rel = path.relative_to(root).as_posix()
        parts = path.relative_to(folder).parts
        if len(parts) != 2:
            problems.append(f"{rel}: not in a category folder; move it to {config.content_dir}/memories/<category>/")
            continue
        category = config.by_folder(parts[0])
        if category is None:
            problems.append(
                f"{rel}: folder '{parts[0]}' is not a configured category; "
                "add it under extra.memsite.categories in mkdocs.yml or move the file"
            )
            continue
        try:
            text = path.read_bytes().decode("utf-8")
            memories.append((rel, parse_memory(text, rel, category=category.name)))
        except UnicodeDecodeError as exc:
            problems.append(f"{rel}: not valid UTF-8 (byte {exc.start}); save the file as UTF-8")
        except FormatError as exc:
            problems.append(str(exc))
    problems += _duplicate_ids(memories)
    problems += _capacities(config, [m for _, m in memories])
    return problems, len(memories)


def _duplicate_ids(memories: list[tuple[str, Memory]]) -> list[str]:
    first: dict[str, str] = {}
    problems = []
    for rel, memory in memories:
        if memory.id in first:
            problems.append(f"{rel}: field 'id': {memory.id} is also the id of {first[memory.id]}; "
                            "give one of them a new id")
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
