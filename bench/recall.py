"""Benchmark: recall beside a plain Python scan of the same files, in one run.

    python bench/recall.py            # 300, 10,000 and 100,000 memories
    python bench/recall.py --quick    # 2,000 memories, a smoke run
    python bench/recall.py --sizes 300,10000   # some of the sizes (a machine whose speed drifts: run it often)

For each size:
  * recall() latency p50/p95 over realistic queries, by words (the store
    opened with ``embedder="none"``; decay and the activity
    journal included; the batch flushes are counted apart), beside a plain
    Python scan that reads every memory file, scores the query's words and
    applies the same decay;
  * a full index rebuild (catalog and full-text index from the files);
  * the incremental update after one commit: by another memsite writer
    (which updates the shared catalog itself) and by plain git (the next read
    catches up by diffing trees);
  * hybrid recall with an embedder (a stand-in hashing words into 384
    dimensions: the cost of memsite's part, not of a model's), its relevance
    floor included (measured once, on the first recall);
  * hybrid recall as agents get it, with the shipped model (minilm: each
    question embedded), at 300 and 10,000; at 100,000, where embedding every
    memory takes minutes, the stand-in's time plus minilm's time to embed a
    question (measured in the same run).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from datetime import UTC, datetime
from pathlib import Path

import report
from corpus import Corpus

from memsite import MemoryStore
from memsite.api import storage_of
from memsite.features.embedders import by_name

WORD = re.compile(r"\w+")
CREATED = re.compile(r"^created: '?([0-9T:Z-]+)'?$", re.M)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def seed(path: Path, corpus: Corpus, count: int) -> MemoryStore:
    log(f"seeding {count:,} memories ...")
    MemoryStore.init(path, agent="bench").close()
    # Words only: with the embed extra installed the default would be hybrid (measured below, and in quality.py).
    store = MemoryStore(path, agent="bench", embedder="none")
    for start in range(0, count, 5000):
        with store.transaction(f"Seed memories {start}-{min(count, start + 5000)}") as tx:
            for _ in range(start, min(count, start + 5000)):
                tx.remember(corpus.text(), category=corpus.category(), dedupe=False)
        log(f"  {min(count, start + 5000):,}")
    return store


def scan(root: Path, query: str, now: datetime, limit: int = 5) -> list[tuple[float, str]]:
    """The baseline: read every memory file, count the query's words, decay by age."""
    words = {w for w in WORD.findall(query.lower()) if len(w) > 2}
    hits = []
    for path in (root / "content" / "memories").rglob("*.md"):
        text = path.read_text(encoding="utf-8")
        lowered = text.lower()
        relevance = sum(lowered.count(w) for w in words)
        if not relevance:
            continue
        created = datetime.strptime(CREATED.search(text).group(1), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        age = (now - created).total_seconds() / 86400
        hits.append((relevance * 2 ** (-age / 30), path.name))
    hits.sort(reverse=True)
    return hits[:limit]


def measure(size: int, workdir: Path, queries: int, baseline_queries: int) -> dict[str, float]:
    corpus = Corpus(seed=size)
    store = seed(workdir / f"m{size}", corpus, size)
    root = store.root
    os.sync()  # measure reads and the index, not the write-back of the seed
    results: dict[str, float] = {}

    log(f"recall at {size:,}: {queries} queries ...")
    asked = [corpus.query() for _ in range(queries)]
    plain, flushes = timed_recalls(store, asked)
    results["recall_p50"], results["recall_p95"] = statistics.median(plain), percentile(plain, 95)
    results["flushes"] = len(flushes)
    results["flush_ms"] = statistics.median(flushes) if flushes else 0.0

    log(f"plain Python scan at {size:,}: {baseline_queries} queries ...")
    now = store.now()
    times = []
    for query in asked[:baseline_queries]:
        start = time.perf_counter()
        scan(root, query, now)
        times.append((time.perf_counter() - start) * 1000)
    results["scan_p50"], results["scan_p95"] = statistics.median(times), percentile(times, 95)

    log(f"full rebuild at {size:,} ...")
    start = time.perf_counter()
    count = store.rebuild_index()
    results["rebuild_rate"] = count / (time.perf_counter() - start)

    log("incremental update after one commit (median of 9 of each kind) ...")
    after_memsite, after_git = [], []
    general = sorted((root / "content" / "memories" / "general").rglob("*.md"))
    for target in general[:: len(general) // 9][:9]:  # spread over the folder
        with MemoryStore(root, agent="other", embedder="none") as other:  # another writer, sharing the catalog
            other.remember(corpus.text(), category="general")
        start = time.perf_counter()
        store.fresh()
        after_memsite.append((time.perf_counter() - start) * 1000)
        text = target.read_text(encoding="utf-8").replace("\n\n", "\n\nEdited by hand. ", 1)
        target.write_text(text, encoding="utf-8")
        subprocess.run(["git", "commit", "-qam", "edit a memory by hand"], cwd=root, check=True)
        start = time.perf_counter()
        store.fresh()
        after_git.append((time.perf_counter() - start) * 1000)
    results["after_memsite_ms"] = statistics.median(after_memsite)
    results["after_git_ms"] = statistics.median(after_git)
    results["after_memsite_max"], results["after_git_max"] = max(after_memsite), max(after_git)

    log(f"hybrid recall at {size:,} (a {HashingEmbedder.dimensions}-dimension stand-in embedder) ...")
    with MemoryStore(root, agent="bench", embedder=HashingEmbedder()) as hybrid:
        start = time.perf_counter()
        hybrid.recall(asked[0])  # embeds every memory, once
        results["embed_all_s"] = time.perf_counter() - start
        plain, _ = timed_recalls(hybrid, asked[:100])
        results["hybrid_p50"], results["hybrid_p95"] = statistics.median(plain), percentile(plain, 95)
    store.close()
    if size <= MINILM_UP_TO:
        log(f"hybrid recall at {size:,} with minilm (embedding every memory once) ...")
        with MemoryStore(root, agent="bench", embedder="minilm") as hybrid:
            hybrid.recall(asked[0])
            plain, _ = timed_recalls(hybrid, asked[:200])
    else:
        embed = by_name("minilm")
        embed("warm up")
        question = []
        for query in asked[:200]:
            start = time.perf_counter()
            embed(query)
            question.append((time.perf_counter() - start) * 1000)
        results["question_p50"] = statistics.median(question)
        plain = [results["hybrid_p50"] + q for q in question]  # (the stand-in's median beside each question's)
    results["minilm_p50"], results["minilm_p95"] = statistics.median(plain), percentile(plain, 95)
    return results


MINILM_UP_TO = 10_000
"""Up to this many memories, hybrid recall is measured with minilm itself (embedding 10,000 takes about 40 s)."""


class HashingEmbedder:
    """A stand-in for a real model: words hashed into a fixed number of dimensions."""

    model = "bench-hashing"
    dimensions = 384

    def __call__(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for word in WORD.findall(text.lower()):
            vector[zlib.crc32(word.encode()) % self.dimensions] += 1.0
        return vector


def timed_recalls(store: MemoryStore, queries: list[str]) -> tuple[list[float], list[float]]:
    """Milliseconds per recall after a warm-up, those that flushed the activity journal apart."""
    for query in queries[:20]:  # warm the caches, as a running agent has them
        store.recall(query)
    plain, flushes = [], []
    for query in queries:
        waiting = storage_of(store).activity.waiting()
        start = time.perf_counter()
        store.recall(query)
        elapsed = (time.perf_counter() - start) * 1000
        (flushes if storage_of(store).activity.waiting() < waiting else plain).append(elapsed)
    return plain, flushes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2,000 memories, for a smoke run")
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / ".tmp",
                        help="where to create the repositories (default: bench/.tmp)")
    parser.add_argument("--sizes", default="300,10000,100000",
                        help="numbers of memories to measure at, among 300, 10000 and 100000 (default: all three)")
    args = parser.parse_args()
    full = {300: (300, 400, 50), 10_000: (10_000, 400, 10), 100_000: (100_000, 400, 3)}
    try:
        sizes = [(2_000, 100, 5)] if args.quick else [full[int(n)] for n in args.sizes.split(",")]
    except (KeyError, ValueError):
        parser.error(f"--sizes: expected numbers among {', '.join(map(str, full))}, got {args.sizes!r}")
    args.dir.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="memsite-recall-", dir=args.dir) as tmp:
        for size, queries, baseline in sizes:
            rows.append((size, measure(size, Path(tmp), queries, baseline)))

    targets = {10_000: 2.0, 100_000: 15.0}
    print(f"\nmemsite recall benchmark ({sys.platform}, Python {sys.version.split()[0]})")
    print("baseline: a plain Python scan reading every memory file, scoring words and decay, per query\n")
    print("| measure | memsite | baseline | ratio | target | met |")
    print("|---|---|---|---|---|---|")
    for size, r in rows:
        target = targets.get(size)
        met = "" if target is None else ("yes" if r["recall_p50"] <= target else "NO")
        print(f"| recall p50 at {size:,} | {r['recall_p50']:.2f} ms | {r['scan_p50']:,.0f} ms | "
              f"{r['scan_p50'] / r['recall_p50']:,.0f}x | {f'<= {target:g} ms' if target else ''} | {met} |")
        print(f"| recall p95 at {size:,} | {r['recall_p95']:.2f} ms | {r['scan_p95']:,.0f} ms | | | |")
        print(f"| recalls that flushed the journal at {size:,} | {int(r['flushes'])}, median {r['flush_ms']:.0f} ms "
              "| | | | |")
        print(f"| index rebuild at {size:,} | {r['rebuild_rate']:,.0f} memories/s | | | >= 5,000/s | "
              f"{'yes' if r['rebuild_rate'] >= 5000 else 'NO'} |")
        for kind, key in (("a memsite commit", "after_memsite"), ("a plain git commit", "after_git")):
            print(f"| update after {kind} at {size:,} (median of 9; slowest) | {r[key + '_ms']:.2f} ms "
                  f"({r[key + '_max']:.1f} ms) | | | <= 5 ms | {'yes' if r[key + '_ms'] <= 5 else 'NO'} |")
        print(f"| hybrid recall p50 at {size:,}, stand-in model: memsite's part (p95) | {r['hybrid_p50']:.2f} ms "
              f"({r['hybrid_p95']:.1f} ms) | | | | |")
        print(f"| embedding every memory once at {size:,} (stand-in model) | {r['embed_all_s']:.1f} s | | | | |")
        minilm_target = {300: 5.0, 10_000: 10.0, 100_000: 30.0}.get(size)
        how = ("stand-in p50 + minilm embedding the question "
               f"({r['question_p50']:.2f} ms)" if "question_p50" in r else "minilm, as agents get it")
        print(f"| hybrid recall p50 at {size:,}, {how} (p95) | {r['minilm_p50']:.2f} ms ({r['minilm_p95']:.1f} ms) "
              "| | | " + (f"<= {minilm_target:g} ms | {'yes' if r['minilm_p50'] <= minilm_target else 'NO'} |"
                          if minilm_target else "| |"))
    if args.quick:
        print("\n(--quick: small sizes; the targets apply to the full run)")
    report.publish("recall", skip=args.quick or len(sizes) < len(full))  # (the page's section holds every size)


if __name__ == "__main__":
    main()
