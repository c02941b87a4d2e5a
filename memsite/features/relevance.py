"""The signals of a memory's relevance to a query, and the floor below which nothing is recalled.

How the signals are fused and ordered is :mod:`memsite.features.retrieval`'s business. Each
means the same whatever the query or the memory:

* meaning: the cosine similarity of the query's and the memory's vectors;
* contrast: the same cosine with the query's and the memory's vectors each less
  the mean vector of the :data:`NEIGHBOURS` memories closest to the query. Those
  neighbours share what the question names (a service, a person); what is left
  is what the question asks about it, so "who should I page when the ledger
  breaks?" matches "Marta leads the team that owns the ledger" rather than the
  ten routine notes about the ledger that are closer by raw cosine. It orders
  what is found (:mod:`memsite.features.retrieval`); it decides nothing;
* words: the share of the query's words the memory holds, each word weighted
  by its rarity in the memories (bm25's idf), so that holding "pgbouncer"
  counts for more than holding "user".

Neither signal is divided by the best match's, so a query about nothing in
memory scores low on both. A memory is recalled when either signal reaches its
floor:

* meaning stands out: the memory's cosine, less the mean of the query's
  cosines with the :data:`BACKGROUND` questions (about what a team's memory is
  not about: cooking, geography, sport), in standard deviations of the latter
  (its *standing*), reaches the meaning floor. A cosine alone says little,
  above all with a static embedder: a paraphrase's answer (0.1 to 0.5 with
  wordllama) lands where an off-topic question's best match does, and the
  latter rises with the number of memories. Against the query's own closeness to off-topic questions,
  an answer stands out where a stray match does not (measured in
  bench/quality.py, with the other baselines tried). The floor is measured on
  the memory itself: each background question's best standing among its
  memories (its baseline the other background questions); the floor is where
  95% of them (``embedding.floor``) recall nothing, counting those some memory
  answers by words as recalling something. So it follows the number of
  memories and suits any embedder. It is measured again when the number of
  memories has changed by :data:`RECALIBRATE`, and kept in ``.memsite/vectors.sqlite3``;
* words >= :data:`WORDS_FLOOR`: the memory holds most of the query's words
  (by rarity), so a keyword query finds what it names.

Once one of a question's memories reaches a floor, the question is about
something in memory, and its other candidates need only :data:`NEAR` of the
meaning floor: a close match just below it is not cut.

Floors per signal rather than on the mix: background questions share a
common word now and then, which would lift a floor on the mix past the
paraphrases that share none (measured in bench/quality.py).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..foundation.text import match_any, search_terms

if TYPE_CHECKING:
    from ..storage.catalog import Catalog
    from ..storage.vectors import Vectors

WORDS_FLOOR = 0.6
"""The share of the query's words (weighted by rarity) that makes a memory a hit whatever its meaning.

Chosen with bench/quality.py --tune on validation.tsv (0.4 to 1 tried)."""
NEIGHBOURS = 30
"""How many of the memories closest to a query make the neighbourhood its contrast is measured against.

Chosen with ``bench/longterm.py --set validation`` (10 to 50, and all the candidates, tried). With
fewer memories than this there is no neighbourhood to contrast with: contrast is not measured."""
NEAR = 0.85
"""The share of the meaning floor a question's other candidates need once one of its memories reaches
the floor (or holds most of its words). The floor decides whether a question is about something in
memory at all; once it is, a close match just below the floor is not cut. Off-topic questions are not
touched: none of their memories reaches the floor.

Chosen with bench/quality.py's validation questions (0.7 to 1 tried, and a fixed margin of 0.5 to 3
standard deviations): paraphrases in the first five 71 -> 73 % at 200 memories and 67 -> 71 % at
10,000, with fewer memories kept beside them than a fixed margin keeps in a small store."""
RECALIBRATE = 0.1
"""The floor is measured again once the number of memories has changed by this share."""
MIN_SPREAD = 0.01
"""The least standard deviation of a query's cosines with the background questions a standing is divided by."""

# Questions a team's memory is not about. Written for bench/quality.py's tuning (the held-out
# off-topic questions in bench/data/heldout.tsv are others), kept here as every query's off-topic
# baseline and the floor's measure.
BACKGROUND = (
    "recipe for chocolate chip cookies", "how deep is the Pacific ocean", "what is the capital of Canada",
    "who won the men's singles at Wimbledon last year", "recommend a podcast about history",
    "how to unclog a bathroom sink", "how long do cats live", "how far away is the moon",
    "how do you say thank you in Korean", "when should I plant tulip bulbs",
    "when did the first moon landing happen", "how to make a perfect omelette", "who sang bohemian rhapsody",
    "how to crochet a blanket", "why is the sky blue", "flights from Lisbon to London",
    "are rust stains removable from clothes", "how to treat a sunburn", "how often should I walk my dog",
    "what is absolute zero", "who sculpted the statue of David", "best hiking trails in Madeira",
    "how to tune a ukulele", "summary of the odyssey", "how to get coffee out of a white shirt",
    "how much protein is in an egg", "when is the next full moon", "what is the longest river in the world",
    "how to oil a bike chain", "how many planets are in the solar system", "how does the knight move in chess",
    "how do ants find food", "what to bring on a camping trip", "how to make pizza dough",
    "how many people live in Brazil", "who wrote war and peace", "tips for better sleep",
    "at what temperature does water freeze in Fahrenheit", "fun card games for two players",
    "how do I apply for a visa to Japan", "when do leaves change colour in autumn", "what is a sonnet",
    "how to season a wok", "what do koalas eat", "how to make an origami frog",
    "what's the climate like in Singapore", "how to repot a cactus", "history of ancient Egypt",
    "how long is a marathon", "how to skip stones on a lake", "how do I make a flexbox layout responsive",
    "what is the difference between HTTP/1.1 and HTTP/2", "how to write a for loop in Lisp",
    "best ergonomic mouse for programmers", "how to set up an Angular project",
    "explain the Byzantine generals problem", "how to implement a binary search tree",
    "what is a closure in JavaScript", "how to change the emacs theme", "which laptop is best for video editing",
)


@dataclass(frozen=True)
class Why:
    """Why a memory was (or was not) recalled for a query: its signals, its places, the floors."""

    meaning: float | None
    """Cosine similarity of query and memory; None when recall is by words only."""
    words: float
    """The share of the query's words the memory holds, weighted by their rarity, 0 to 1."""
    matched: tuple[str, ...]
    """The query's words the memory holds."""
    relevance: float
    """What found the memory, 0 to 1: its closeness in meaning and its word match, fused
    (:mod:`memsite.features.retrieval`); by words only, bm25 divided by the best match's."""
    floor: float | None
    """The standing a memory needs (or :data:`WORDS_FLOOR` of words): the meaning floor, or :data:`NEAR` of it
    once another memory of the question reached a floor; None by words only or with no floor."""
    kept: bool
    standing: float | None = None
    """How far the cosine stands above the query's cosines with the background questions, in their
    standard deviations; None by words only or with no floor."""
    meaning_place: int | None = None
    """Its place among the candidates by meaning (1: the closest); None by words only."""
    words_place: int | None = None
    """Its place among the memories holding the query's words, by bm25 (1: the best); None if it holds none."""
    contrast: float | None = None
    """Its cosine against the query's neighbourhood (see :class:`Signals`); None when not measured."""

    def __str__(self) -> str:
        words = f"words {self.words:.2f}" + (f" ({', '.join(self.matched)})" if self.matched else "")
        if self.meaning is None:
            return f"{words}, bm25 #{self.words_place}: words only, any shared word is kept"
        places = f"meaning #{self.meaning_place}" + (f", words #{self.words_place}" if self.words_place else "")
        if self.contrast is not None:
            places += f", contrast {self.contrast:.2f}"
        fused = f"{places} -> relevance {self.relevance:.2f}"
        if self.floor is None or self.standing is None:
            return f"meaning {self.meaning:.2f}, {words} (no floor); {fused}"
        meaning = f"meaning {self.meaning:.2f}, {self.standing:.1f} sd above off-topic questions"
        if not self.kept:
            reason = f"{meaning} < floor {self.floor:.1f}, {words} < {WORDS_FLOOR:g}"
        elif self.standing >= self.floor:
            reason = f"{meaning} >= floor {self.floor:.1f}, {words}"
        else:
            reason = f"{words} >= {WORDS_FLOOR:g}, {meaning} (floor {self.floor:.1f})"
        return f"{reason}; {fused}"


def word_weights(terms: list[str], counts: dict[str, int], total: int) -> dict[str, float]:
    """Each of ``terms``' share of the query by its idf among ``total`` memories (the shares add up to 1).

    A term no memory holds has the highest idf. Weighing it as the mean of the others instead was
    tried: "error E9772 fix" then found its answer by words, but so did "how long do cats live"
    (a memory about long-lived branches), which raised the meaning floor and cost paraphrases
    (bench/quality.py's validation questions at 200 memories: 73 % against 76 %).
    """
    weight = {t: math.log(1 + (total - counts.get(t, 0) + 0.5) / (counts.get(t, 0) + 0.5)) for t in terms}
    whole = sum(weight.values())
    return {t: w / whole for t, w in weight.items()} if whole else {}


def word_share(weights: dict[str, float], matched: Iterable[str]) -> float:
    """The share of the query's words in ``matched``, by their :func:`word_weights`."""
    return min(1.0, sum(weights.get(t, 0.0) for t in set(matched)))


def baseline(cosines: list[float]) -> tuple[float, float]:
    """The mean and standard deviation (at least :data:`MIN_SPREAD`) of a query's cosines with background questions."""
    mean = sum(cosines) / len(cosines)
    spread = math.sqrt(sum((c - mean) ** 2 for c in cosines) / len(cosines))
    return mean, max(spread, MIN_SPREAD)


@dataclass(frozen=True)
class Signals:
    """What one memory shows of its relevance to a query, before anything is ranked."""

    meaning: float | None
    """Cosine similarity of query and memory; None by words only."""
    bm25: float
    """bm25 divided by the best word match's (the best has 1); 0 when it holds none of the query's words."""
    words: float
    """The share of the query's words the memory holds, weighted by their rarity (see :func:`word_share`)."""
    matched: tuple[str, ...]
    """The query's words the memory holds."""
    standing: float | None
    """The cosine's standing above off-topic questions (see the module's docstring); None without a floor."""
    contrast: float | None = None
    """The cosine against the query's neighbourhood (see the module's docstring); None by words only, or
    with fewer memories than :data:`NEIGHBOURS`."""


def signals(catalog: Catalog, vectors: Vectors | None, query: str, keep: int | None, allowed: set[int] | None = None,
            *, standing: bool = True, shares: bool = True, contrasts: bool = True) -> dict[int, Signals]:
    """Row number -> :class:`Signals` of the memories closest to ``query`` by meaning or by words.

    The ``keep`` best by bm25 and (with ``vectors``) the ``keep`` closest by meaning, all when
    None, among ``allowed`` when given. ``standing``: measure each cosine against the query's
    cosines with the :data:`BACKGROUND` questions. ``shares``: measure the share of the query's
    words each holds (a full-text look-up per word; recall by words alone does not need it).
    ``contrasts``: measure each one's contrast against the query's neighbourhood.
    """
    terms = search_terms(query)
    words = catalog.lexical(match_any(terms)) if terms else {}
    if allowed is not None:
        words = {n: r for n, r in words.items() if n in allowed}
    best = words if keep is None or len(words) <= keep else \
        dict(sorted(words.items(), key=lambda item: item[1], reverse=True)[:keep])
    cosines = {} if vectors is None else vectors.closest(catalog, query, keep, allowed, best)
    closeness: dict[int, float | None] = dict(cosines) if vectors is not None else dict.fromkeys(best)
    counts, holding = catalog.term_counts(terms, [n for n in closeness if n in words]) if shares else ({}, {})
    total = catalog.count() if vectors is None else vectors.size(catalog)
    mean, spread = baseline(vectors.similarities(query, BACKGROUND)) \
        if standing and vectors is not None and closeness else (0.0, 0.0)
    weights = word_weights(terms, counts, total)
    contrast: dict[int, float] = {}
    if contrasts and vectors is not None and len(cosines) >= NEIGHBOURS:
        near = heapq.nlargest(NEIGHBOURS, cosines, key=cosines.__getitem__)
        contrast = vectors.contrast(catalog, query, cosines, near)
    found = {}
    for n, cosine in closeness.items():
        matched = tuple(holding.get(n, ()))
        found[n] = Signals(cosine, words.get(n, 0.0), word_share(weights, matched), matched,
                           (cosine - mean) / spread if spread and cosine is not None else None, contrast.get(n))
    return found


def calibrated_floor(catalog: Catalog, vectors: Vectors, share: float) -> float:
    """The meaning floor for these memories: ``share`` of the background questions recall nothing below it.

    A question's best standing is taken against the other background questions, as a query's against
    them all; a question that some memory answers by words (:data:`WORDS_FLOOR`) recalls something
    whatever the floor, so it counts as above it; but when more of them do than ``1 - share``
    allows, as in a memory about cooking, they are not off-topic for it: the floor is measured
    on the others alone.
    """
    vectors.references(BACKGROUND)  # embedded at once (and kept) rather than one by one
    best = []
    for i, question in enumerate(BACKGROUND):
        found = signals(catalog, vectors, question, 50, standing=False, contrasts=False)
        if any(signal.words >= WORDS_FLOOR for signal in found.values()):
            best.append(math.inf)
            continue
        others = vectors.similarities(question, BACKGROUND)
        mean, spread = baseline(others[:i] + others[i + 1:])
        best.append((max((signal.meaning or 0.0 for signal in found.values()), default=mean) - mean) / spread)
    finite = sorted(b for b in best if b < math.inf)
    index = math.ceil(share * len(best))
    if index >= len(finite):
        index = math.ceil(share * len(finite))
    return finite[min(len(finite) - 1, index)] if finite else 0.0


def floor(catalog: Catalog, vectors: Vectors, share: float) -> float | None:
    """The meaning floor for the memories of the catalog's commit (None when ``share`` is 0: no floor).

    Measured once, and again as their number changes by :data:`RECALIBRATE`.
    """
    if share <= 0:
        return None
    key = f"{vectors.model} standing share={share:g}"
    memories = vectors.size(catalog)
    found = vectors.saved_floor(key, memories, RECALIBRATE)
    if found is None:
        found = calibrated_floor(catalog, vectors, share)
        vectors.save_floor(key, memories, found)
    return found
