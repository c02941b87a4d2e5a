"""The event log: one immutable session record per task.

``sessions/<YYYY-MM-DD>_<type>_<keywords>.md``: frontmatter for tools (the
site, reports) and, for people, the sections the three-dimensional memory
specification gave the log (docs/design.md, "The founding specifications"): task
information, problem, solution, execution, learnings.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..foundation.errors import FormatError
from ..foundation.fileformat import dump_yaml, split_frontmatter
from ..foundation.record import format_time, parse_time

OUTCOMES = ("succeeded", "partial", "failed", "abandoned")  # partial: closed with plan items not checked
_NAME_PART = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class SessionRecord:
    """What one task did: written once when the task closes, never changed."""

    name: str
    agent: str
    type: str
    keywords: tuple[str, ...]
    started: datetime
    finished: datetime
    outcome: str
    rounds: int
    problem: str
    solution: str
    pattern: str | None = None
    learnings: tuple[str, ...] = ()
    error: str | None = None
    plan: tuple[tuple[str, bool, str], ...] = ()  # (TODO item, done, note) as the task left them

    @property
    def seconds(self) -> int:
        return max(0, int((self.finished - self.started).total_seconds()))


def session_name_part(text: str, limit: int = 40) -> str:
    """``text`` as part of a session file name: lowercase words joined by '_'."""
    return _NAME_PART.sub("_", text.lower()).strip("_")[:limit].strip("_")


def session_name(day: datetime, type: str, keywords: Collection[str], taken: Collection[str]) -> str:
    """``2026-11-20_debug_undefined_var_add``; a suffix (``_2``...) instead of overwriting."""
    words = "_".join(part for part in (session_name_part(k) for k in keywords) if part)[:80].strip("_")
    base = "_".join(p for p in (day.strftime("%Y-%m-%d"), session_name_part(type, 30) or "task", words) if p)
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name


def demote_headings(text: str) -> str:
    """Make '#' and '##' headings inside recorded text '###', so sections stay sections."""
    return re.sub(r"(?m)^#{1,2}(?=\s)", "###", text.strip())


def render(record: SessionRecord) -> str:
    meta: dict[str, Any] = {
        "session": record.name,
        "agent": record.agent,
        "type": record.type,
        "keywords": list(record.keywords),
        "started": format_time(record.started),
        "finished": format_time(record.finished),
        "outcome": record.outcome,
        "rounds": record.rounds,
        "seconds": record.seconds,
        "pattern": record.pattern,
    }
    if record.error:
        meta["error"] = record.error
    outcome = record.outcome + (f" ({record.error})" if record.error else "")
    learnings = "\n".join(f"- {' '.join(item.split())}" for item in record.learnings) or "- (none recorded)"
    plan = "\n".join(f"- [{'x' if done else ' '}] {' '.join(item.split())}"
                     + (f" — {' '.join(note.split())}" if note else "")
                     for item, done, note in record.plan)
    return (
        f"---\n{dump_yaml(meta)}---\n\n"
        f"# Session: {record.name}\n\n"
        f"## Task information\n\n"
        f"- Time: {format_time(record.started)}\n"
        f"- Agent: {record.agent}\n"
        f"- Type: {record.type}\n"
        f"- Keywords: {', '.join(record.keywords) or '(none)'}\n"
        f"- Outcome: {outcome}\n\n"
        f"## Problem\n\n{demote_headings(record.problem) or '(not described)'}\n\n"
        f"## Solution\n\n{demote_headings(record.solution) or '(not described)'}\n\n"
        + (f"## Plan\n\n{plan}\n\n" if plan else "")
        + f"## Execution\n\n"
        f"- Pattern matched: {record.pattern or 'none'}\n"
        f"- Rounds: {record.rounds}\n"
        f"- Seconds: {record.seconds}\n\n"
        f"## Learnings\n\n{learnings}\n"
    )


def parse(text: str, where: str) -> SessionRecord:
    """Read a session record written by :func:`render`.

    Raises:
        FormatError: naming the file, the field and the fix.
    """
    meta, body = split_frontmatter(text, where)

    def field(name: str, kind: type, required: bool = True) -> Any:
        value = meta.get(name)
        if value is None and not required:
            return None
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
            raise FormatError(f"{where}: field '{name}': expected {kind.__name__}, got {value!r}; "
                              "session records are written by memsite and never edited")
        return value

    def time_field(name: str) -> datetime:
        try:
            return parse_time(meta.get(name))
        except ValueError:
            raise FormatError(f"{where}: field '{name}': expected a time like 2026-11-20T14:03:00Z, "
                              f"got {meta.get(name)!r}") from None

    outcome = field("outcome", str)
    if outcome not in OUTCOMES:
        raise FormatError(f"{where}: field 'outcome': expected one of {', '.join(OUTCOMES)}, got {outcome!r}")
    keywords = field("keywords", list)
    sections = _sections(body)
    learnings = tuple(line[2:].strip() for line in sections.get("Learnings", "").split("\n")
                      if line.startswith("- ") and line[2:].strip() != "(none recorded)")
    return SessionRecord(
        name=field("session", str), agent=field("agent", str), type=field("type", str),
        keywords=tuple(str(k) for k in keywords), started=time_field("started"), finished=time_field("finished"),
        outcome=outcome, rounds=field("rounds", int), problem=_unset(sections.get("Problem", "")),
        solution=_unset(sections.get("Solution", "")), pattern=field("pattern", str, required=False),
        learnings=learnings, error=field("error", str, required=False), plan=_plan(sections.get("Plan", "")),
    )


def _plan(text: str) -> tuple[tuple[str, bool, str], ...]:
    items = []
    for line in text.split("\n"):
        match = re.match(r"- \[([ x])\] (.*?)(?: — (.*))?$", line)
        if match:
            items.append((match.group(2), match.group(1) == "x", match.group(3) or ""))
    return tuple(items)


def _unset(text: str) -> str:
    return "" if text == "(not described)" else text


def _sections(body: str) -> dict[str, str]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in body.split("\n"):
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines).strip() for name, lines in sections.items()}
