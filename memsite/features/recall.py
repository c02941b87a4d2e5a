"""Recall results, and the memory tools an agent's LLM can call.

``store.recall`` returns :class:`Hit` objects that carry every part of the
score, so a person (or the site) can see why a memory ranked where it did.
The tools follow the long-term memory interface of the memory-module
specification (docs/design.md, "The founding specifications"):
``record_to_memory(thinking, content)`` and ``retrieve_from_memory(keywords)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..foundation.errors import MemsiteError
from ..foundation.record import Memory, one_line, short_id, truncate
from .relevance import Why

if TYPE_CHECKING:
    from ..storage import Storage


@dataclass(frozen=True)
class Hit:
    """A recalled memory and its score: ``relevance x prior`` (see :mod:`memsite.features.retrieval`).

    With ``ranking="freshness"``, and where memsite ranks without a query (the site,
    ``rank``), the seed's ``relevance x decay x boost``. The memory's ``created`` and
    ``updated`` say when it was written and last changed.
    """

    memory: Memory
    relevance: float
    """How well the text matches the query, in (0, 1].

    By words only: bm25 divided by the best match's (the best has 1). With an
    embedder: its closeness in meaning and its word match fused (see
    :mod:`memsite.features.retrieval`); recall returns only memories above the floor. 1 without a query."""
    decay: float
    """2^(-age_days / half_life_days); 1 for pinned memories."""
    boost: float
    """1 + active_weight x ln(1 + active_count)."""
    score: float
    why: Why | None = None
    """From a recall: the signals, the places, the floor, whether it was kept."""
    prior: float | None = None
    """From a recall ranked by relevance: ``1 - PRIOR + PRIOR x min(1, decay x boost)``, what time
    takes off the relevance (see :mod:`memsite.features.retrieval`); None otherwise."""

    def recalled(self, now: datetime) -> Hit:
        """This hit with its memory's count raised by this recall."""
        memory = self.memory.replace(active_count=self.memory.active_count + 1, last_recalled=now)
        return replace(self, memory=memory)


def format_hits(hits: Sequence[Hit]) -> str:
    """Hits as text for a prompt: category, abstract and the gist, best first."""
    lines = []
    for hit in hits:
        m = hit.memory
        detail = m.overview or (m.content if m.content != m.abstract else "")
        gist = f": {truncate(one_line(detail), 300)}" if detail else ""
        replaced = f"; superseded by {short_id(m.superseded_by)}" if m.superseded_by else ""
        lines.append(f"- [{m.category}] {m.abstract}{gist} (written {m.created:%Y-%m-%d}, id {short_id(m.id)}"
                     f"{replaced})")
    return "\n".join(lines)


# --- the agent's tools -------------------------------------------------------------

TOOLS: list[dict[str, Any]] = [
    {
        "name": "record_to_memory",
        "description": (
            "Save things worth remembering across sessions: facts about the user, preferences, "
            "solutions to problems, reusable procedures. Each item of 'content' becomes one memory; "
            "an item that repeats an existing memory is merged or skipped."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "thinking": {"type": "string", "description": "Why these are worth remembering."},
                "content": {
                    "type": "array", "items": {"type": "string"}, "minItems": 1,
                    "description": "The memories to save, each a self-contained statement.",
                },
                "supersedes": {
                    "type": "string",
                    "description": "With one item in 'content': the id of a memory it replaces because that "
                                   "one is no longer true (kept, marked superseded; recall leaves it out).",
                },
            },
            "required": ["thinking", "content"],
            "additionalProperties": False,
        },
    },
    {
        "name": "retrieve_from_memory",
        "description": "Look up memories by keywords; returns the best matches, most relevant and recent first.",
        "parameters": {
            "type": "object",
            "properties": {
                "keywords": {
                    "type": "array", "items": {"type": "string"}, "minItems": 1,
                    "description": "Words or short phrases to search for.",
                },
            },
            "required": ["keywords"],
            "additionalProperties": False,
        },
    },
]


def _strings(arguments: Mapping[str, Any], name: str) -> list[str]:
    value = arguments.get(name)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"'{name}' must be a non-empty list of non-empty strings")
    return value


def call_tool(store: Storage, recall: Callable[[str], list[Hit]], name: str, arguments: Mapping[str, Any] | str) -> str:
    """Run one of :data:`TOOLS` (``recall`` answers a query); the result, or the error, is text for the LLM."""
    try:
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else arguments
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments must be a JSON object ({exc.msg} at character {exc.pos})") from None
        if not isinstance(args, Mapping):
            raise ValueError("arguments must be a JSON object")
        spec = next((tool for tool in TOOLS if tool["name"] == name), None)
        if spec is None:
            raise ValueError(f"unknown tool {name!r}; the tools are {', '.join(t['name'] for t in TOOLS)}")
        unknown = set(args) - set(spec["parameters"]["properties"])
        if unknown:
            raise ValueError(f"unknown argument(s) {', '.join(sorted(unknown))}")
        if name == "record_to_memory":
            thinking = args.get("thinking")
            if not isinstance(thinking, str):
                raise ValueError("'thinking' must be a string")
            return record_items(store, thinking, _strings(args, "content"), supersedes=superseded(args))
        hits = recall(" ".join(_strings(args, "keywords")))
        return f"Memories matching {', '.join(args['keywords'])}:\n{format_hits(hits)}" if hits else \
            f"No memory matches {', '.join(args['keywords'])}."
    except (ValueError, MemsiteError) as exc:
        return f"Error: {exc}"


def superseded(args: Mapping[str, Any]) -> str | None:
    """The ``supersedes`` argument of ``record_to_memory``, checked: an id, given with one item."""
    value = args.get("supersedes")
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError("'supersedes' must be the id of a memory")
    if len(args.get("content") or []) != 1:
        raise ValueError("'supersedes' goes with one item in 'content': the memory that replaces it")
    return value.strip()


def record_items(store: Storage, thinking: str, items: list[str], category: str = "general",
                 supersedes: str | None = None) -> str:
    """``record_to_memory``: each item a memory of ``category``, one commit; the answer the model reads."""
    subject = truncate("Record to memory: " + (one_line(thinking) or "from the agent"), 72)
    with store.transaction(subject) as tx:
        results = [tx.remember(item, category=category, source=f"tool:{store.agent}", supersedes=supersedes)
                   for item in items]
    stats = tx.stats
    ids = ", ".join(short_id(m.id) for m in results)
    replaced = f". It supersedes {results[0].supersedes}, no longer recalled." if supersedes else ""
    return (f"Recorded {len(items)} item(s): {stats['created']} new, {stats['merged']} merged into existing "
            f"memories, {stats['skipped']} already known. Ids: {ids}{replaced}")
