"""Recall, from a query to ranked hits: relevance decides what is recalled, time orders what is close.

Read from :func:`recall` down. A recall runs in two phases, as a search engine's rank profile
declares them:

1. **Find** (:func:`find`). The memories holding any of the query's words, by bm25 (SQLite
   FTS5), and with an embedder the memories closest in meaning, by cosine: the best
   ``max(50, 10 x limit)`` of each list (:func:`memsite.features.relevance.signals`), among the memories
   the filters allow (category, agent, tags, ``since`` / ``until`` on the date written). A
   candidate is *kept* when one signal reaches its floor (:mod:`memsite.features.relevance`): its
   meaning stands out from off-topic questions, or it holds most of the query's words (once one
   candidate does, the others need only :data:`~memsite.features.relevance.NEAR` of the meaning
   floor); by words only, every memory holding a query word is kept. Its *relevance* fuses the two scores, each
   on a 0-1 scale among the candidates: ``w x closeness + (1 - w) x bm25 x share ** 0.5``, where
   closeness is ``(1 - c) x cosine + c x contrast`` (:data:`CONTRAST`), each scaled between the
   candidates' lowest (0) and highest (1); contrast is the cosine against the query's
   neighbourhood, what sets the question apart from what the memories closest to it share
   (:mod:`memsite.features.relevance`). bm25 is divided by the best match's, and share is the
   part of the query's words (by rarity) the memory holds (``w``: ``embedding.weight``;
   :data:`WORDS_POWER`). By words only, relevance is bm25 divided by the best match's.

2. **Order** (:func:`order`). ``score = relevance x prior``, where the prior
   ``1 - PRIOR + PRIOR x min(1, decay x boost)`` lies between ``1 - PRIOR`` and 1: a memory
   written today, pinned, or often recalled keeps its whole relevance, a year-old one
   :data:`PRIOR` less. So time reorders memories of about the same relevance, but a memory
   more than :data:`PRIOR` more relevant than another is never placed below it for its age.

What no longer holds (superseded, ``valid_until`` passed) is left out of both phases unless
``include_superseded``; ``as_of`` asks as of a past moment (:mod:`memsite.features.asof`): in valid time
the memories written by then that held then, ordered as then; in record time (``record_time``)
the same over the memories of the last commit before it, by words.

``ranking="freshness"`` orders the same kept candidates by the seed's formula instead,
``relevance x decay x boost`` (decay ``2^(-age / half-life)``), for agents that want the newest
first; it is what memsite ranks by where there is no query (:func:`rank`: the site's rankings,
"fading soon", trimming), with relevance 1.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from ..foundation import inputs
from ..foundation.errors import InvalidInput
from ..foundation.record import format_time
from ..foundation.text import only_stopwords, search_terms
from ..storage import Storage
from ..storage.catalog import Catalog
from .asof import moment
from .recall import Hit
from .relevance import NEAR, WORDS_FLOOR, Signals, Why, floor, signals

RANKINGS = ("relevance", "freshness")
"""How recall orders what it finds: relevance first (time a bounded prior), or the seed's decay."""
WORDS_POWER = 0.5
"""How much of bm25 a memory holding a part of the query's words keeps: bm25 x share ** this.

So a memory sharing one common word of the question is not as relevant as one holding them all.
Chosen with ``bench/longterm.py --set validation`` (0 to 1 tried), with ``embedding.weight`` and
:data:`PRIOR`. Reciprocal-rank fusion was tried there too (rank constants 2 to 60, with and
without this): at best 0.88 of the answers in the first five, against 0.89 for this fusion and
0.80 for bm25 alone; it also put a memory first that held one common word of the question.
bm25 x share (this at 1) found 0.886 there, but 0.84 against 0.87 on the held-out questions."""
CONTRAST = 0.75
"""The part of closeness in meaning that is the contrast against the query's neighbourhood (the rest: the cosine).

Chosen with ``bench/longterm.py --set validation`` (0 to 1 tried, with
:data:`memsite.features.relevance.NEIGHBOURS`): 0.94 of the answers in the first five, against
0.89 with the cosine alone (0.94 with the contrast alone, but it placed recent answers lower)."""
PRIOR = 0.1
"""The most a memory's age and recall count can take off its relevance, as a share (0.05 to 0.2 tried)."""
QUERY_CHARS = 4096
"""The length of query recall reads; the rest of a longer text is left out, for words and meaning alike."""


@dataclass(frozen=True)
class Request:
    """One recall's question and filters, checked (see :meth:`memsite.MemoryStore.recall`)."""

    query: str
    limit: int | None
    category: str | None = None
    agent: str | None = None
    tags: tuple[str, ...] = ()
    min_score: float = 0.0
    since: datetime | None = None
    until: datetime | None = None
    ranking: str = "relevance"
    include_superseded: bool = False
    as_of: datetime | None = None
    record_time: bool = False
    explained: bool = False
    """For ``explain``: by words only too, measure each hit's share of the query's words."""


def request(store: Storage, query: object, limit: object, category: str | None, tags: Iterable[str],
            agent: str | None, min_score: object, since: object = None, until: object = None,
            ranking: object = "relevance", *, include_superseded: bool = False, as_of: object = None,
            record_time: bool = False) -> Request:
    """The :class:`Request` these arguments make; InvalidInput names the first that is wrong."""
    if not isinstance(query, str):
        raise InvalidInput(f"query: expected text, got {type(query).__name__}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidInput(f"limit: expected a whole number >= 0, got {limit!r}")
    if isinstance(min_score, bool) or not isinstance(min_score, (int, float)) or min_score != min_score:
        raise InvalidInput(f"min_score: expected a number, got {min_score!r}")
    if ranking not in RANKINGS:
        raise InvalidInput(f"ranking: expected one of {', '.join(RANKINGS)}, got {ranking!r}")
    now = store.now()
    start = inputs.moment(since, "since", now)
    end = inputs.moment(until, "until", now, end_of_day=True)
    if start is not None and start > now:
        raise InvalidInput(f"since: {format_time(start)} is in the future; no memory was written after now")
    if start is not None and end is not None and start > end:
        raise InvalidInput(f"since ({format_time(start)}) is after until ({format_time(end)}): nothing lies between")
    at = None if as_of is None else moment(as_of, now, store.born())
    if record_time and at is None:
        raise InvalidInput("record_time: give as_of too (the moment whose commit to read)")
    name = store.config.route(category).name if category is not None else None
    return Request(query[:QUERY_CHARS], None if limit is None else min(limit, 2**62), name, agent,
                   inputs.tags(tags), float(min_score), start, end, str(ranking), bool(include_superseded), at,
                   bool(record_time))


def recall(store: Storage, asked: Request, *, below: bool = False) -> list[Hit]:
    """The hits for ``asked``, best first (``below``: the candidates the floor left out instead)."""
    if not search_terms(asked.query) and (store.vectors is None or not asked.query.strip()
                                          or only_stopwords(asked.query)):
        return []  # nothing but common words: any memory would match as well as any other
    if asked.as_of is not None and asked.record_time:  # over the memories of the last commit before then
        commit = store.commit_at(asked.as_of)
        return [] if commit is None or below else store.at_commit(commit, lambda past: _recall(store, asked, below,
                                                                                               past))
    return store.healing(lambda: _recall(store, asked, below, store.catalog), reading=True)


def _recall(store: Storage, asked: Request, below: bool, catalog: Catalog) -> list[Hit]:
    with store.repo.thread_lock:
        store.fresh()
        found = find(store, asked, catalog)
        chosen = {n: why for n, why in found.items() if why.kept != below}
        return order(store, chosen, asked, catalog)


def find(store: Storage, asked: Request, catalog: Catalog | None = None) -> dict[int, Why]:
    """Row number -> :class:`Why` of each candidate: its signals, places, fused relevance, and whether it is kept.

    ``catalog``: the memories of a past commit (record time: by words alone, the vectors follow the tip).
    """
    catalog = catalog or store.catalog
    vectors = store.vectors if catalog is store.catalog else None
    category, agent, tags = catalog.selective(asked.category, asked.agent, asked.tags)
    allowed = catalog.matching(category, agent, tags, asked.since, asked.until)
    keep = None if asked.limit is None else max(50, 10 * asked.limit)
    weight = store.config.embedding_weight
    line = None if vectors is None else floor(catalog, vectors, store.config.embedding_floor)
    found = signals(catalog, vectors, asked.query, keep, allowed, standing=line is not None,
                    shares=vectors is not None or asked.explained)
    # What no longer held (or was not written yet) at the moment asked about: dropped from the candidates,
    # which are few, rather than every other memory listed as allowed.
    gone = catalog.outside(found, None if asked.include_superseded else asked.as_of or store.now(), asked.as_of)
    found = {n: s for n, s in found.items() if n not in gone}
    by_words = _places(found, lambda s: s.bm25 if s.bm25 > 0 else None)
    if vectors is None:
        return {n: Why(None, s.words, s.matched, s.bm25, None, True, None, None, by_words[n])
                for n, s in found.items()}
    by_meaning = _places(found, lambda s: s.meaning)
    closeness = _scaled({n: s.meaning or 0.0 for n, s in found.items()})
    if any(s.contrast is not None for s in found.values()):
        contrast = _scaled({n: s.contrast or 0.0 for n, s in found.items()})
        closeness = {n: (1 - CONTRAST) * c + CONTRAST * contrast[n] for n, c in closeness.items()}
    if line is not None and any(_reaches(s, line, weight) for s in found.values()):
        line = min(line, line * NEAR)  # the question is about something in memory: its close matches count too
    whys = {}
    for n, s in found.items():
        relevance = weight * closeness[n] + (1 - weight) * s.bm25 * s.words ** WORDS_POWER
        kept = (s.words > 0 or (s.meaning or 0) > 0) and (s.standing is None or _reaches(s, line, weight))
        whys[n] = Why(s.meaning, s.words, s.matched, relevance, line, kept, s.standing,
                      by_meaning[n], by_words.get(n), s.contrast)
    return whys


def _reaches(s: Signals, line: float | None, weight: float) -> bool:
    """Whether a candidate's meaning stands ``line`` above off-topic questions, or it holds most of the words."""
    return (weight > 0 and line is not None and s.standing is not None and s.standing >= line) or (
        weight < 1 and s.words >= WORDS_FLOOR)


def _scaled(values: dict[int, float]) -> dict[int, float]:
    """Each value scaled between the lowest (0) and the highest (1) of them; all 1 when they are equal."""
    low, high = min(values.values(), default=0.0), max(values.values(), default=0.0)
    return {n: (v - low) / (high - low) if high > low else 1.0 for n, v in values.items()}


def _places(found: dict[int, Signals], value: object) -> dict[int, int]:
    """Row number -> place (1 = best) by ``value(signals)``, of the rows that have a value; equal values share one."""
    scored = sorted(((v, n) for n, s in found.items() if (v := value(s)) is not None),  # type: ignore[operator]  # values of one kind
                    reverse=True)
    places: dict[int, int] = {}
    for i, (v, n) in enumerate(scored):
        places[n] = places[scored[i - 1][1]] if i and scored[i - 1][0] == v else i + 1
    return places


def order(store: Storage, found: dict[int, Why], asked: Request, catalog: Catalog | None = None) -> list[Hit]:
    """The found memories as hits, by ``relevance x prior`` (or the seed's decay), the best ``limit``;
    as of ``asked.as_of``, their ages then."""
    config = store.config
    catalog = catalog or store.catalog
    candidates = {n: why.relevance for n, why in found.items()}
    if asked.ranking != "freshness" and asked.limit is not None and len(candidates) > asked.limit:
        # The prior takes at most PRIOR off a relevance: what is below (1 - PRIOR) of the limit-th best
        # relevance cannot reach the first ``limit`` (of a recall's 50 or more candidates, a few remain)
        least = (1 - PRIOR) * heapq.nlargest(asked.limit, candidates.values())[-1]
        candidates = {n: r for n, r in candidates.items() if r >= least}
    # Ordered, cut at ``min_score`` and to the best ``limit`` in SQLite, by the score below: only those are read
    # as memories
    rows = catalog.ranked(now=format_time(asked.as_of or store.now()), half_life_days=config.half_life_days,
                          active_weight=config.active_weight, relevance=candidates, limit=asked.limit,
                          min_score=asked.min_score, prior=None if asked.ranking == "freshness" else PRIOR)
    hits = []
    for memory, relevance, decay, boost, seed, n in rows:
        if asked.ranking == "freshness":
            prior, score = None, seed
        else:
            prior = 1 - PRIOR + PRIOR * min(1.0, decay * boost)
            score = relevance * prior
        hits.append(Hit(memory, relevance, decay, boost, score, found[n], prior))
    return hits


def rank(store: Storage, limit: int | None, category: str | None, include_superseded: bool = False) -> list[Hit]:
    """Every memory (or one category's) still holding (``include_superseded``: those replaced too) by the
    seed's decay x boost, relevance 1: the site's ranking."""
    asked = request(store, "", limit, category, (), None, 0.0)
    config = store.config

    def ranked() -> list[Hit]:
        with store.repo.thread_lock:
            store.fresh()
            now = store.now()
            rows = store.catalog.ranked(now=format_time(now), half_life_days=config.half_life_days,
                                        active_weight=config.active_weight, limit=asked.limit,
                                        category=asked.category, valid_at=None if include_superseded else now)
        return [Hit(memory, relevance, decay, boost, score) for memory, relevance, decay, boost, score, _ in rows]

    return store.healing(ranked, reading=True)
