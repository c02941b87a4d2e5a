"""Memory texts and queries for the benchmarks, like an agent team's, made deterministically.

Words follow a Zipf distribution, as in English: the most frequent ranks are
function words (about half of all words), then technical words, then a long
tail of rare ones (project names, hosts, identifiers). So a query word matches
a realistic share of memories: a few percent for common words, fewer for the
rest. No two texts are near-duplicates, so dedup keeps them all.
"""

from __future__ import annotations

import itertools
import random

from memsite.foundation.text import STOPWORDS

COMMON = """
deploy staging production release build test tests flaky timeout retry cache database migration index
schema query latency memory cpu disk network queue worker job pipeline branch merge review commit
config setting flag feature bug fix error warning log logs metric alert dashboard service api client
server request response token auth user users team owner agent planner review docs readme version
upgrade downgrade dependency package module file folder path script command shell python go rust node
docker image container cluster node pod helm chart terraform state bucket backup restore snapshot
permission role secret vault key rotation certificate domain dns proxy load balancer port host
""".split()
CATEGORIES = ["profile", "preferences", "entities", "events", "cases", "patterns", "general"]
SYLLABLES = ["ka", "lo", "mi", "ra", "te", "zu", "no", "pe", "si", "vo", "da", "gu", "fe", "ri", "xo", "ba"]


def vocabulary(size: int = 12_000) -> list[str]:
    """Function words first (the most frequent), then COMMON words, then made-up rarer names."""
    rare = ("".join(parts) for n in (2, 3, 4) for parts in itertools.product(SYLLABLES, repeat=n))
    head = sorted(STOPWORDS) + COMMON
    return head + [word for word, _ in zip(rare, range(size - len(head)))]


class Corpus:
    def __init__(self, seed: int = 20261122) -> None:
        self.rng = random.Random(seed)
        self.words = vocabulary()
        weights = [1.0 / (rank + 1) ** 1.05 for rank in range(len(self.words))]
        self.cumulative = list(itertools.accumulate(weights))
        self.count = 0

    def _sentence(self, length: int) -> str:
        words = self.rng.choices(self.words, cum_weights=self.cumulative, k=length)
        return " ".join(words).capitalize() + "."

    def text(self) -> str:
        """A memory: a first line that sums it up, then a sentence or two of detail."""
        self.count += 1
        lines = [self._sentence(self.rng.randint(6, 12)) + f" (#{self.count})"]
        for _ in range(self.rng.randint(1, 2)):
            lines.append(self._sentence(self.rng.randint(10, 20)))
        return lines[0] + "\n\n" + " ".join(lines[1:])

    def category(self) -> str:
        return self.rng.choice(CATEGORIES)

    def query(self) -> str:
        """What an agent asks: two to four words, sometimes wrapped in a question."""
        # Content words (an agent asks about things, not about 'the'), weighted by frequency.
        first = len(STOPWORDS)
        weights = [w - self.cumulative[first - 1] for w in self.cumulative[first : first + 3000]]
        words = self.rng.choices(self.words[first : first + 3000], cum_weights=weights, k=self.rng.randint(2, 4))
        if self.rng.random() < 0.3:
            return f"how do we handle the {' '.join(words)}?"
        return " ".join(words)
