"""Per-agent notes: accumulated knowledge, and the working memory of the current task.

``notes/<agent>/agent_knowledge.md`` holds counters in its frontmatter and the
patterns learned as bullets under ``## Patterns`` (people may edit them; other
sections they add are kept). ``notes/<agent>/task_process.md`` is the working
memory of the task in progress: its state in the frontmatter, and the TODO
list rendered below it for people, always ending with the four closing steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..foundation.errors import FormatError
from ..foundation.fileformat import dump_yaml, split_frontmatter
from ..foundation.record import format_time, parse_time

CLOSING_STEPS = (
    "Create the session record",
    "Update agent_knowledge.md (task count, rounds, patterns)",
    "Merge world state",
    "Clear task_process.md",
)
_PROVENANCE = re.compile(r"\s*_\(from [^)]*\)_\s*$")
_WORD = re.compile(r"[a-z0-9]+")


# --- agent knowledge ----------------------------------------------------------


@dataclass(frozen=True)
class Knowledge:
    """What an agent has accumulated across tasks."""

    agent: str
    task_count: int = 0
    total_rounds: int = 0
    patterns: tuple[tuple[str, str | None], ...] = ()  # (pattern, session it came from)
    other: str = ""  # sections people added, kept as they are

    def with_task(self, rounds: int, patterns: list[str], session: str) -> Knowledge:
        known = {text.lower() for text, _ in self.patterns}
        added = tuple((p, session) for p in patterns if p.lower() not in known)
        return Knowledge(self.agent, self.task_count + 1, self.total_rounds + rounds, self.patterns + added, self.other)

    def matching(self, type: str, keywords: list[str]) -> list[str]:
        """Patterns whose text shares a word with the task's keywords, best first.

        Only words that say something count: not the task type nor the name of
        the session a pattern came from (every pattern learned in a 'plan'
        task would match every plan), not numbers, not stopwords; the type
        only breaks ties.
        """
        from ..foundation.text import STOPWORDS

        wanted = {w for w in _WORD.findall(" ".join(keywords).lower()) if w not in STOPWORDS and not w.isdigit()}
        scored = []
        for position, (text, _source) in enumerate(self.patterns):
            words = set(_WORD.findall(text.lower()))  # not the source's name: its type and date say nothing
            score = len(wanted & words)
            if score:
                scored.append((-score - 0.5 * (type.lower() in words), position, text))
        return [text for _, _, text in sorted(scored)]


def render_knowledge(knowledge: Knowledge, updated: datetime) -> str:
    meta = {"agent": knowledge.agent, "task_count": knowledge.task_count,
            "total_rounds": knowledge.total_rounds, "updated": format_time(updated)}
    patterns = "\n".join(f"- {text}" + (f" _(from {source})_" if source else "") for text, source in knowledge.patterns)
    other = f"\n{knowledge.other.strip()}\n" if knowledge.other.strip() else ""
    return (f"---\n{dump_yaml(meta)}---\n\n# Agent knowledge: {knowledge.agent}\n\n"
            f"- Tasks: {knowledge.task_count}\n- Rounds: {knowledge.total_rounds}\n\n"
            f"## Patterns\n\n{patterns or '(none yet)'}\n{other}")


def parse_knowledge(text: str, where: str, agent: str) -> Knowledge:
    meta, body = split_frontmatter(text, where)
    counts = {}
    for name in ("task_count", "total_rounds"):
        value = meta.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise FormatError(f"{where}: field '{name}': expected a whole number >= 0, got {value!r}; "
                              "fix the number or restore the file from git")
        counts[name] = value
    patterns: list[tuple[str, str | None]] = []
    other: list[str] = []
    section = None
    for line in body.split("\n"):
        if line.startswith("## "):
            section = line[3:].strip()
            if section != "Patterns":
                other.append(line)
            continue
        if section == "Patterns":
            if line.startswith("- "):
                source = re.search(r"_\(from ([^)]*)\)_\s*$", line)
                patterns.append((_PROVENANCE.sub("", line[2:]).strip(), source.group(1) if source else None))
        elif section is not None:
            other.append(line)
    return Knowledge(agent, counts["task_count"], counts["total_rounds"], tuple(patterns), "\n".join(other).strip())


# --- task process (working memory) ---------------------------------------------


@dataclass
class TodoItem:
    text: str
    done: bool = False
    note: str = ""


@dataclass
class TaskState:
    """Everything a task knows so far: enough to resume it after a crash."""

    agent: str
    type: str
    keywords: list[str]
    started: datetime
    rounds: int = 0
    todo: list[TodoItem] = field(default_factory=list)
    problem: str = ""
    solution: str = ""
    learnings: list[str] = field(default_factory=list)
    world: dict[str, str] = field(default_factory=dict)
    world_remove: list[str] = field(default_factory=list)
    pattern: str | None = None


def render_process(state: TaskState | None, agent: str) -> str:
    """The task_process.md of ``state``; with None, the cleared file."""
    if state is None:
        return (f"---\n{dump_yaml({'agent': agent, 'status': 'idle'})}---\n\n"
                f"# Task process: {agent}\n\nNo task in progress.\n")
    meta: dict[str, Any] = {
        "agent": state.agent, "status": "in-progress", "type": state.type, "keywords": list(state.keywords),
        "started": format_time(state.started), "rounds": state.rounds,
        "todo": [{"item": t.text, "done": t.done, "note": t.note} for t in state.todo],
        "problem": state.problem, "solution": state.solution, "learnings": list(state.learnings),
        "world": dict(state.world), "world_remove": list(state.world_remove), "pattern": state.pattern,
    }

    def box(done: bool) -> str:
        return "[x]" if done else "[ ]"

    plan = "\n".join(f"- {box(t.done)} {t.text}" + (f" ({t.note})" if t.note else "") for t in state.todo)
    closing = "\n".join(f"- [ ] {step}" for step in CLOSING_STEPS)
    return (f"---\n{dump_yaml(meta)}---\n\n# Task process: {state.agent}\n\n"
            f"{state.type}: {', '.join(state.keywords) or '(no keywords)'}, started {format_time(state.started)}, "
            f"round {state.rounds}.\n\n## Plan\n\n{plan or '(no plan yet)'}\n\n## Closing steps\n\n{closing}\n")


def parse_process(text: str, where: str) -> TaskState | None:
    """The task in progress recorded in ``text``, or None when it is idle."""
    meta, _ = split_frontmatter(text, where)
    if meta.get("status") != "in-progress":
        return None
    try:
        return TaskState(
            agent=str(meta["agent"]), type=str(meta["type"]), keywords=[str(k) for k in meta.get("keywords") or []],
            started=parse_time(meta["started"]), rounds=int(meta.get("rounds") or 0),
            todo=[TodoItem(str(t["item"]), bool(t.get("done")), str(t.get("note") or ""))
                  for t in meta.get("todo") or []],
            problem=str(meta.get("problem") or ""), solution=str(meta.get("solution") or ""),
            learnings=[str(x) for x in meta.get("learnings") or []],
            world={str(k): str(v) for k, v in (meta.get("world") or {}).items()},
            world_remove=[str(k) for k in meta.get("world_remove") or []],
            pattern=meta.get("pattern"),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise FormatError(f"{where}: the task in progress cannot be read ({exc!r}); "
                          "restore the file from git or abandon the task") from None
