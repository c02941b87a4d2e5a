"""Skill drafts: a pattern recalled often enough becomes a SKILL.md for a person to review.

A candidate comes from a memory in the patterns category whose recall count
reached the threshold. With an LLM the pattern is analysed by it (below 0.7
confidence there is no candidate); without one, a deterministic analysis takes
the steps from the pattern's numbered or bulleted lists and the triggers from
its abstract and tags, and the draft says so.

Drafts carry a checksum of what memsite wrote, so rewriting them never
overwrites a draft a person has edited since.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..foundation.errors import InvalidInput, MemsiteError
from ..foundation.record import Memory, slugify

if TYPE_CHECKING:
    from ..storage import Storage

log = logging.getLogger("memsite.features.skills")

MIN_CONFIDENCE = 0.7
THRESHOLD = 5
PATTERNS = "patterns"
_LIST_ITEM = re.compile(r"^\s{0,3}(?:\d{1,3}[.)]|[-*+])\s+(?:\[[ xX]\]\s+)?(.+?)\s*$", re.MULTILINE)
_CHECKSUM = re.compile(r"^  draft_checksum: ([0-9a-f]{64})$", re.MULTILINE)

LLM_PROMPT = """\
You decide whether a reusable pattern an AI agent keeps using should become an agent skill.

Pattern (abstract): {abstract}
Tags: {tags}
Pattern text:
<<<
{content}
>>>

Answer with one JSON object and nothing else:
{{"name": "lowercase-hyphenated-skill-name", "description": "when and why to use it, one sentence",
  "triggers": ["situation that should invoke the skill", ...],
  "steps": ["imperative step", ...],
  "confidence": 0.0-1.0 (how well this pattern works as a self-contained, repeatable procedure)}}
"""


@dataclass(frozen=True)
class SkillCandidate:
    """A pattern that could become an agent skill."""

    name: str
    description: str
    triggers: tuple[str, ...]
    steps: tuple[str, ...]
    source_pattern_id: str
    confidence: float
    recalls: int = 0
    analysis: str = "deterministic"  # or "llm"
    source_abstract: str = ""


def candidates(store: Storage, threshold: int, llm: Callable[[str], str] | None) -> list[SkillCandidate]:
    """See :meth:`MemoryStore.skill_candidates`."""
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
        raise InvalidInput(f"threshold: expected a whole number >= 1, got {threshold!r}")
    if not any(c.name == PATTERNS for c in store.config.categories):
        return []
    return promote(store.list(category=PATTERNS), threshold, llm)


def promote(memories: Iterable[Memory], threshold: int = THRESHOLD,
            llm: Callable[[str], str] | None = None) -> list[SkillCandidate]:
    """The skills that patterns among ``memories`` recalled ``threshold`` times or more could become, best first."""
    hot = [m for m in memories if m.category == PATTERNS and m.active_count >= threshold]
    found = [c for m in hot if (c := analyse(m, llm)) is not None]
    return sorted(found, key=lambda c: (-c.recalls, -c.confidence, c.name))


def analyse(pattern: Memory, llm: Callable[[str], str] | None = None) -> SkillCandidate | None:
    """The skill ``pattern`` could become, or None when it is not procedure enough."""
    if llm is not None:
        return _by_llm(pattern, llm)
    steps = tuple(_clean(s) for s in _LIST_ITEM.findall(pattern.content))
    steps = tuple(s for s in steps if s)
    if not steps:  # prose: its sentences are the best steps there are, with little confidence
        steps = tuple(s for s in (_clean(x) for x in re.split(r"(?<=[.!?])\s+", pattern.content)) if s)[:8]
        confidence = 0.5
    else:
        confidence = {1: 0.6, 2: 0.75}.get(len(steps), 0.9)
    if confidence < MIN_CONFIDENCE:
        return None
    triggers = [f"When {_lower_first(pattern.abstract.rstrip('.'))}"]
    triggers += [f"Work involving {tag}" for tag in pattern.tags]
    return SkillCandidate(
        name=_name(pattern.abstract, pattern.id), description=pattern.abstract, triggers=tuple(triggers),
        steps=steps[:20], source_pattern_id=pattern.id, confidence=confidence, recalls=pattern.active_count,
        analysis="deterministic", source_abstract=pattern.abstract,
    )


def _by_llm(pattern: Memory, llm: Callable[[str], str]) -> SkillCandidate | None:
    from .extract import find_object

    prompt = LLM_PROMPT.format(abstract=pattern.abstract, tags=", ".join(pattern.tags) or "(none)",
                               content=pattern.content)
    try:
        answer = find_object(llm(prompt))
    except Exception as exc:  # noqa: BLE001 (an LLM failing is logged, never fatal: no candidate this time)
        log.warning("skill analysis of pattern %s failed: %s", pattern.id, exc)
        return None
    if not isinstance(answer, dict):
        log.warning("skill analysis of pattern %s: the answer held no JSON object", pattern.id)
        return None
    try:
        confidence = float(answer.get("confidence", 0))
    except (TypeError, ValueError):
        confidence = 0.0
    steps = _strings(answer.get("steps"))
    if confidence < MIN_CONFIDENCE or not steps:
        return None
    described = answer.get("description")
    description = described if isinstance(described, str) else pattern.abstract
    return SkillCandidate(
        name=_name(str(answer.get("name") or pattern.abstract), pattern.id),
        description=" ".join(description.split())[:1024] or pattern.abstract,
        triggers=_strings(answer.get("triggers")), steps=steps, source_pattern_id=pattern.id,
        confidence=min(confidence, 1.0), recalls=pattern.active_count, analysis="llm",
        source_abstract=pattern.abstract,
    )


def render_skill(candidate: SkillCandidate) -> str:
    """The SKILL.md draft of ``candidate``: agent-skill frontmatter, a needs-review note, triggers, steps.

    The last metadata line is a checksum of the rest, so a later rewrite can
    tell a draft left as written from one a person edited.
    """
    metadata = {
        "source": "memsite",
        "pattern_id": candidate.source_pattern_id,
        "confidence": round(candidate.confidence, 2),
        "analysis": candidate.analysis,
        "status": "needs review",
    }
    front = yaml.safe_dump({"name": candidate.name, "description": candidate.description, "metadata": metadata},
                           sort_keys=False, allow_unicode=True, width=1000)
    body = _body(candidate)
    checksum = _checksum(f"---\n{front}---\n\n{body}")
    return f"---\n{front}  draft_checksum: {checksum}\n---\n\n{body}"


def _body(candidate: SkillCandidate) -> str:
    how = ("an LLM analysed the pattern" if candidate.analysis == "llm" else
           "deterministic analysis: steps taken from the pattern's lists, triggers from its abstract and tags; "
           "no LLM was consulted")
    lines = [
        f"# {candidate.name}", "",
        "> **Needs review.** Drafted by memsite from the pattern "
        f"`{candidate.source_pattern_id}` (recalled {candidate.recalls} times), "
        f"confidence {candidate.confidence:.0%}; {how}. Edit it, then remove this note.", "",
        "## When to use", "",
        *[f"- {t}" for t in candidate.triggers or ("(no triggers found)",)], "",
        "## Steps", "",
        *[f"{n}. {s}" for n, s in enumerate(candidate.steps, start=1)], "",
    ]
    return "\n".join(lines)


def write_drafts(found: list[SkillCandidate], folder: Path) -> list[tuple[SkillCandidate, Path, str]]:
    """Write each draft to ``folder/<name>/SKILL.md``; (candidate, path, what happened) each.

    What happened: ``written`` (new), ``updated`` (memsite's earlier draft,
    unedited), ``unchanged``, or ``kept`` (a person edited it: left alone).
    """
    results = []
    for candidate in found:
        path = folder / candidate.name / "SKILL.md"
        text = render_skill(candidate)
        if path.exists():
            old = path.read_text(encoding="utf-8", errors="replace")
            if old == text:
                results.append((candidate, path, "unchanged"))
                continue
            if not _unedited(old):
                results.append((candidate, path, "kept"))
                continue
            status = "updated"
        else:
            status = "written"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise MemsiteError(f"{path}: cannot write the skill draft ({exc.strerror}); choose another --write "
                               "folder") from None
        results.append((candidate, path, status))
    return results


def _unedited(text: str) -> bool:
    """Whether a draft is exactly as memsite wrote it (the rest matches its checksum line)."""
    match = _CHECKSUM.search(text)
    if match is None:
        return False
    rest = text[:match.start()] + text[match.end():].removeprefix("\n")
    return _checksum(rest) == match.group(1)


def _checksum(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()


def _name(text: str, fallback: str) -> str:
    """An agent-skill name: lowercase letters, digits and hyphens, at most 64 characters."""
    name = slugify(text, limit=64)
    return name if name != "memory" else f"pattern-{fallback.lower()}"[:64]


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(s for s in (_clean(v) for v in value if isinstance(v, str)) if s)[:20]


def _clean(text: str) -> str:
    return " ".join(text.replace("`", "'").split())[:300]


def _lower_first(text: str) -> str:
    """'Cutting a release' -> 'cutting a release'; an acronym ('CI fails') stays as it is."""
    return text if text[:2].isupper() else text[:1].lower() + text[1:]
