"""Whether two memories speak of one thing without saying the same: a possible contradiction.

"The user lives in Paris." beside "The user lives in Berlin." share most of
their content words, yet too few word pairs for a near-duplicate (see
:func:`memsite.foundation.text.similarity`). Every write of a new memory looks
for such memories in its category and flags them (``contradicts`` in its
frontmatter) or, where a language model judges, acts on its answer
(:mod:`memsite.features.contradictions`).
"""

from __future__ import annotations

from .record import Memory
from .text import STOPWORDS, match_any, search_terms, similarity, words

FIELD = "contradicts"  # the frontmatter field of a flagged memory: ids of the memories it may replace
OVERLAP = 0.5  # share of content words (Dice) from which two memories of a category may speak of one thing
SHOWN = 5  # candidates looked at


def overlap(a: str, b: str) -> float:
    """The Dice coefficient of the two texts' content words (stopwords left out)."""
    wa = {w for w in words(a) if w not in STOPWORDS}
    wb = {w for w in words(b) if w not in STOPWORDS}
    return 2 * len(wa & wb) / (len(wa) + len(wb)) if wa and wb else 0.0


def candidates(content: str, near: list[Memory], dedupe_threshold: float) -> list[Memory]:
    """The memories of ``near`` (the best word matches in the category, still holding) that may say
    something else about what ``content`` speaks of, most alike first."""
    scored = [(overlap(content, m.content), m) for m in near]
    found = [(score, m) for score, m in scored
             if score >= OVERLAP and similarity(content, m.content) < dedupe_threshold]
    return [m for _, m in sorted(found, key=lambda pair: -pair[0])]


def query(content: str) -> str | None:
    """The full-text query that finds a memory's possible counterparts (None: it has no content word)."""
    terms = search_terms(content[:4096])
    return match_any(terms) if terms else None


def flagged(memory: Memory) -> list[str]:
    """The ids ``memory`` is flagged as possibly contradicting (``contradicts``), as written."""
    value = memory.extra.get(FIELD)
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
