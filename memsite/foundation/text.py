"""Text comparison for recall and dedup: words, fingerprints, similarity, search queries.

Pure functions. A query for SQLite's full-text index is built from words
only, each quoted, so any text a user types is a valid query.
"""

from __future__ import annotations

import functools
import hashlib
import re
import zlib
from itertools import pairwise

_WORD = re.compile(r"\w+")

# Words too common to say what a memory is about (English; other languages pass through).
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having
    he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
    nor not now of off on once only or other our ours ourselves out over own same she should so some such
    than that the their theirs them themselves then there these they this those through to too under until
    up very was we were what when where which while who whom why will with would you your yours yourself
    yourselves""".split()
)


def words(text: str) -> list[str]:
    """The words of ``text``, case-folded."""
    return _WORD.findall(text.casefold())


@functools.lru_cache(maxsize=4096)  # a write fingerprints and sketches the same text, twice each
def _word_tuple(text: str) -> tuple[str, ...]:
    return tuple(words(text))


def normalize(text: str) -> str:
    """Text as compared for exact duplicates: words only, case-folded, single spaces."""
    return " ".join(_word_tuple(text))


@functools.lru_cache(maxsize=4096)  # a write computes it, then the catalog again for the same text
def fingerprint(text: str) -> str:
    """Equal for texts that differ only in case, punctuation, markup and spacing."""
    return hashlib.sha1(normalize(text).encode("utf-8")).hexdigest()


def _shingles(text: str) -> set[tuple[str, ...]]:
    found = _word_tuple(text)
    return set(pairwise(found)) if len(found) >= 2 else {(w,) for w in found}


def similarity(a: str, b: str) -> float:
    """How alike two texts are, in [0, 1]: the Dice coefficient of their word pairs.

    Word order counts: 'prefers tabs over spaces' and 'prefers spaces over
    tabs' share every word but few pairs. Dice (2|A∩B| / (|A|+|B|)) rather
    than Jaccard, so adding a few words to a short fact ('... in eu-west-1')
    still reads as the same fact, while changing one ('limit is 100' / 'limit
    is 1000') does not. Texts of one word compare words.
    """
    sa, sb = _shingles(a), _shingles(b)
    if len(next(iter(sa), ())) != len(next(iter(sb), ())):  # one text of a single word
        sa, sb = {(w,) for w in words(a)}, {(w,) for w in words(b)}
    if not sa and not sb:
        return 1.0
    return 2 * len(sa & sb) / (len(sa) + len(sb))


SKETCH_SIZE = 6


@functools.lru_cache(maxsize=4096)
def sketch(text: str, size: int = SKETCH_SIZE) -> tuple[int, ...]:
    """The ``size`` smallest hashes of the text's word pairs (a bottom-k sketch).

    Texts sharing most of their word pairs share several of these values (at
    the default dedup threshold about four of six), texts that merely share a
    common phrase at most one or two, so near-duplicates are found by an
    indexed lookup (see :func:`shared_needed`) instead of a search. Pairs of
    stopwords are left out (unless the text has nothing else).
    """
    pairs = _shingles(text)
    # Pairs of function words ('of the') are in most texts: as sketch values they
    # would make every text a candidate for every other. Content pairs only.
    meaningful = [pair for pair in pairs if pair[0] not in STOPWORDS or pair[-1] not in STOPWORDS] or pairs
    return tuple(sorted({zlib.crc32("\x1f".join(pair).encode("utf-8")) for pair in meaningful})[:size])


def sketch_key(category: str, value: int) -> int:
    """One integer for (category, sketch value), so the catalog looks it up by integer alone."""
    return category_key(category) | value


@functools.lru_cache(maxsize=256)
def category_key(category: str) -> int:
    """The high bits of :func:`sketch_key` for ``category`` (its sketch values are the low 32)."""
    return (zlib.crc32(category.encode("utf-8")) & 0x7FFFFFFF) << 32


def shared_needed(marks: tuple[int, ...]) -> int:
    """How many sketch values a near-duplicate candidate must share: two, or one for tiny texts."""
    return 2 if len(marks) >= 4 else 1


def _quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def search_terms(text: str) -> list[str]:
    """The distinct words of a query that say something (stopwords dropped: 'the and of' searches nothing).

    Lower-cased as the full-text index folds them, not case-folded: "Straße" folds to "strasse",
    which the index of a memory that says "Straße" does not hold."""
    return [w for w in dict.fromkeys(_WORD.findall(text.lower())) if w not in STOPWORDS]


def only_stopwords(text: str) -> bool:
    """True when ``text`` has words and every one is a stopword (a query that can match anything)."""
    found = words(text)
    return bool(found) and all(w in STOPWORDS for w in found)


def match_any(terms: list[str]) -> str:
    """An FTS5 query matching documents with any of ``terms`` (each quoted)."""
    return " OR ".join(_quoted(t) for t in terms)
