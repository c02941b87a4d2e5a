"""Core memory: the prompt-ready text an agent loads when it starts.

``load_core`` puts together the world state, the pinned memories and this
agent's most recent memories, cut to a number of lines; ``load_topic`` is the
full text of one category; ``recent`` the bounded list of recent memory texts
(the 10 latest, oldest first, empty ones skipped, as the specification of a
bounded recent list asked: docs/design.md, "The founding specifications").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..foundation.errors import ConfigError
from ..foundation.record import Memory, one_line, truncate

DEFAULT_DIR = "~/.memsite/memory"
TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


def recent_memories(memories: Sequence[Memory], n: int) -> list[Memory]:
    """The ``n`` most recent memories, oldest first, without empty ones."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n: expected a whole number >= 0, got {n!r}")
    kept = [m for m in sorted(memories, key=lambda m: (m.created, m.id)) if m.content.strip()]
    return kept[max(0, len(kept) - n):] if n else []


def recent_texts(memories: Sequence[Memory], n: int) -> list[str]:
    """The texts of the ``n`` most recent memories, oldest first, without empty ones."""
    return [m.content for m in recent_memories(memories, n)]


def core_text(world: Mapping[str, str], pinned: Sequence[Memory], recent: Sequence[Memory | str], agent: str) -> str:
    """The whole core memory, before any line limit; '' when there is nothing."""
    sections = []
    if world:
        lines = []
        for key in sorted(world):
            value = world[key].strip()
            if "\n" in value:
                lines.append(f"- {key}:\n" + "\n".join(f"  {line}" if line else "" for line in value.split("\n")))
            else:
                lines.append(f"- {key}: {value}")
        sections.append("# World state\n\n" + "\n".join(lines))
    if pinned:
        sections.append("# Pinned memories\n\n" + "\n\n".join(
            f"## {m.category}: {m.abstract}\n\n{m.content}" for m in pinned))
    if recent:
        sections.append(f"# Recent memories of {agent}\n\n" + "\n".join(_bullet(text) for text in recent))
    return "\n\n".join(sections)


def _bullet(memory: Memory | str) -> str:
    """A memory as one Markdown list item: its abstract, then the lines of its text indented under it."""
    text = memory if isinstance(memory, str) else memory.content
    lines = [truncate(line.rstrip(), 300) for line in text.strip().split("\n") if line.strip()]
    if not isinstance(memory, str) and one_line(memory.content) != one_line(memory.abstract):
        lines = [truncate(one_line(memory.abstract), 300) + ":", *lines]
    body = [f"  {line}" for line in lines[1:8]] + (["  …"] if len(lines) > 8 else [])
    return "\n".join([f"- {lines[0]}", *body])


def first_lines(text: str, limit: int) -> str:
    """At most ``limit`` lines of ``text``; when lines are cut, the last one says which and how to see them."""
    if not text or limit == 0:
        return ""
    lines = text.split("\n")
    if len(lines) <= limit:
        return text
    kept = lines[:limit - 1]
    cut = [line[2:] for line in lines[limit - 1:] if line.startswith("# ")]
    where = f" (from {', '.join(cut)})" if cut else ""
    cut_n = len(lines) - len(kept)
    note = (f"[{cut_n} more line{'' if cut_n == 1 else 's'} cut{where}: 'memsite core --lines {len(lines)}' shows all; "
            "raise auto_load_lines in mkdocs.yml]")
    return "\n".join([*kept, note])


def topic_text(memories: Sequence[Memory]) -> str:
    """All memories of one category in the entry format of the persistent-memory specification, oldest first."""
    entries = [
        f"### [{m.created:%Y-%m-%d %H:%M}] {m.category}\n\n{m.content}\n\n---"
        for m in sorted(memories, key=lambda m: (m.created, m.id))
    ]
    return "\n\n".join(entries)


def auto_load_lines(environ: Mapping[str, str], default: int) -> int:
    raw = environ.get("MEMSITE_AUTO_LOAD_LINES", "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"MEMSITE_AUTO_LOAD_LINES: expected a whole number >= 1, got {raw!r}")
    return int(raw)
