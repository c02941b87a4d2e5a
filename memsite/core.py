"""Core memory: the prompt-ready text an agent loads when it starts.

``load_core`` puts together the world state, the pinned memories and this
agent's most recent memories, cut to a number of lines; ``load_topic`` is the
full text of one category; ``recent`` the bounded list of recent memory texts
(the original spec's list of the 10 latest, oldest first, empty ones skipped).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .errors import ConfigError
from .model import Memory, one_line, truncate

DEFAULT_DIR = "~/.memsite/memory"
TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


def recent_texts(memories: Sequence[Memory], n: int) -> list[str]:
    """The texts of the ``n`` most recent memories, oldest first, without empty ones."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n: expected a whole number >= 0, got {n!r}")
    texts = [m.content for m in sorted(memories, key=lambda m: (m.created, m.id)) if m.content.strip()]
    return texts[max(0, len(texts) - n) :] if n else []


def core_text(world: Mapping[str, str], pinned: Sequence[Memory], recent: Sequence[str], agent: str) -> str:
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
        sections.append(f"# Recent memories of {agent}\n\n" + "\n".join(
            f"- {truncate(one_line(text), 300)}" for text in recent))
    return "\n\n".join(sections)


def first_lines(text: str, limit: int) -> str:
    """At most ``limit`` lines of ``text``."""
    if not text:
        return ""
    return "\n".join(text.split("\n")[:limit])


def topic_text(memories: Sequence[Memory]) -> str:
    """All memories of one category in the original spec's entry format, oldest first."""
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
