"""Benchmark: does recall find the right memory? Word-only beside hybrid (wordllama), in one run.

    python bench/quality.py            # quality on the labelled set, latency at 10,000 and 100,000
    python bench/quality.py --quick    # quality, and latency at 2,000 only

The labelled set in bench/data/ was written for this benchmark: 200 memories
of a payments team's agents across the seven categories (memories.tsv) and
105 questions (queries.tsv), each naming the memory that answers it. 65 are
paraphrases that share few or no words with their answer ("how do we stop
customers getting their money back twice?" for the memory about webhook
retries duplicating refunds); 40 are keyword queries that do. For each
question: recall@5 (the answer is among the first five) and the reciprocal
rank of the answer (MRR, 0 past the tenth), by words only and hybrid.

Then latency: the same questions against the labelled set padded with
generated memories (bench/corpus.py) to 10,000 and 100,000, p50 of each kind
of recall after a warm-up, and the quality again among those distractors.
Recall counts and age are neutralised (active_weight 0; all memories
written in the same minute), so only relevance orders the results.

    python bench/quality.py --tune     # the weight of meaning, on held-out questions

The default weight of meaning in hybrid relevance was chosen with --tune on
70 other questions about the same memories (validation.tsv: 55 paraphrases,
15 keyword queries), alone and among 9,800 generated memories unlike the
ones above, so the figures this prints are not tuned on their own questions.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from corpus import Corpus

from memsite import MemoryStore
from memsite.config import Config

DATA = Path(__file__).resolve().parent / "data"
KINDS = ("paraphrase", "keyword")


@dataclass(frozen=True)
class Query:
    kind: str
    targets: tuple[str, ...]
    text: str


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load(questions: str = "queries.tsv") -> tuple[list[dict[str, str]], list[Query]]:
    with open(DATA / "memories.tsv", newline="", encoding="utf-8") as f:
        memories = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    with open(DATA / questions, newline="", encoding="utf-8") as f:
        queries = [Query(row["kind"], tuple(t for t in row["targets"].split(",") if t), row["query"])
                   for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
    keys = {m["key"] for m in memories}
    assert all(set(q.targets) <= keys for q in queries), "a query names a memory that is not in memories.tsv"
    return memories, queries


def create(path: Path, memories: list[dict[str, str]], padding: int, seed: int | None = None) -> dict[str, str]:
    """A repository with the labelled memories and ``padding`` generated ones; labelled key -> memory id."""
    with MemoryStore.init(path, agent="bench") as store:
        settings = store.root / "mkdocs.yml"  # relevance alone orders results: no boost from recall counts
        settings.write_text(settings.read_text().replace("active_weight: 0.1", "active_weight: 0"))
        ids = {}
        with store.transaction("Labelled memories") as tx:
            for m in memories:
                ids[m["key"]] = tx.remember(m["content"], category=m["category"], dedupe=False).id
        corpus = Corpus(seed=padding if seed is None else seed)
        for start in range(0, padding, 5000):
            with store.transaction(f"Padding {start}") as tx:
                for _ in range(start, min(padding, start + 5000)):
                    tx.remember(corpus.text(), category=corpus.category(), dedupe=False)
            log(f"  padded {min(padding, start + 5000):,}")
        subprocess.run(["git", "commit", "-qam", "no recall boost"], cwd=store.root, check=True)
    return ids


def rank_of(store: MemoryStore, query: Query, ids: dict[str, str]) -> int | None:
    wanted = {ids[t] for t in query.targets}
    for i, hit in enumerate(store.recall(query.text, limit=10), 1):
        if hit.memory.id in wanted:
            return i
    return None


def quality(store: MemoryStore, queries: list[Query], ids: dict[str, str]) -> dict[str, tuple[float, float]]:
    """Kind -> (recall@5 in %, MRR)."""
    ranks: dict[str, list[int | None]] = {kind: [] for kind in (*KINDS, "all")}
    for query in queries:
        rank = rank_of(store, query, ids)
        ranks[query.kind].append(rank)
        ranks["all"].append(rank)
    return {kind: (100 * sum(1 for r in rs if r and r <= 5) / len(rs), sum(1 / r for r in rs if r) / len(rs))
            for kind, rs in ranks.items() if rs}


def latency(store: MemoryStore, queries: list[Query], rounds: int = 3) -> float:
    """p50 milliseconds of a recall, after a warm-up; recalls that flushed recall counts left out."""
    for query in queries[:20]:
        store.recall(query.text)
    times = []
    for _ in range(rounds):
        for query in queries:
            waiting = store.activity.waiting()
            start = time.perf_counter()
            store.recall(query.text)
            elapsed = (time.perf_counter() - start) * 1000
            if store.activity.waiting() >= waiting:
                times.append(elapsed)
    return statistics.median(times)


def measure(path: Path, memories: list[dict[str, str]], queries: list[Query], padding: int) -> dict[str, object]:
    log(f"repository with {len(memories) + padding:,} memories ...")
    ids = create(path, memories, padding)
    result: dict[str, object] = {"size": len(memories) + padding}
    for name in ("none", "wordllama"):
        with MemoryStore(path, agent="bench", embedder=name) as store:
            start = time.perf_counter()
            store.recall("warm up")  # builds the index; the hybrid store embeds every memory once
            result[f"{name}_first_s"] = time.perf_counter() - start
            log(f"  {name}: quality ...")
            result[f"{name}_quality"] = quality(store, queries, ids)
            log(f"  {name}: latency ...")
            result[f"{name}_p50"] = latency(store, queries)
    return result


def tune(workdir: Path) -> None:
    """recall@5 and MRR on the held-out questions for weights of meaning from 0.4 to 0.7."""
    memories, queries = load("validation.tsv")
    weights = (0.4, 0.5, 0.6, 0.7)
    print("| memories | weight of meaning | paraphrase recall@5 | paraphrase MRR | keyword recall@5 | keyword MRR |")
    print("|---|---|---|---|---|---|")
    for padding in (0, 9_800):
        path = workdir / f"v{padding}"
        ids = create(path, memories, padding, seed=777 + padding)
        rows = []
        with MemoryStore(path, agent="bench", embedder="none") as store:
            rows.append(("words only", quality(store, queries, ids)))
        with MemoryStore(path, agent="bench", embedder="wordllama") as store:
            for weight in weights:
                store.config = dataclasses.replace(store.config, embedding_weight=weight)
                rows.append((f"{weight:g}", quality(store, queries, ids)))
        for name, result in rows:
            (p5, pm), (k5, km) = result["paraphrase"], result["keyword"]
            print(f"| {len(memories) + padding:,} | {name} | {p5:.0f}% | {pm:.2f} | {k5:.0f}% | {km:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="latency at 2,000 memories only")
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / ".tmp",
                        help="where to create the repositories (default: bench/.tmp)")
    parser.add_argument("--tune", action="store_true", help="weights of meaning on the held-out questions")
    args = parser.parse_args()
    if args.tune:
        args.dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="memsite-tune-", dir=args.dir) as tmp:
            tune(Path(tmp))
        return
    memories, queries = load()
    paddings = [0, 1_800] if args.quick else [0, 9_800, 99_800]
    args.dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="memsite-quality-", dir=args.dir) as tmp:
        results = [measure(Path(tmp) / f"q{padding}", memories, queries, padding) for padding in paddings]

    counts = {kind: sum(1 for q in queries if q.kind == kind) for kind in KINDS}
    print(f"\nmemsite recall quality ({sys.platform}, Python {sys.version.split()[0]}): "
          f"{len(memories)} labelled memories, {counts['paraphrase']} paraphrase and {counts['keyword']} keyword "
          f"queries; word-only recall (bm25) beside hybrid (bm25 + wordllama cosine, weight {Config().embedding_weight:g})\n")
    print("| memories | queries | recall@5 word-only | recall@5 hybrid | gain | MRR word-only | MRR hybrid |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        words, hybrid = r["none_quality"], r["wordllama_quality"]
        for kind in (*KINDS, "all"):
            (w5, wm), (h5, hm) = words[kind], hybrid[kind]  # type: ignore[index]
            print(f"| {r['size']:,} | {kind} | {w5:.0f}% | {h5:.0f}% | {h5 - w5:+.0f} pts | {wm:.2f} | {hm:.2f} |")
    print("\n| memories | recall p50 word-only | recall p50 hybrid | target (hybrid) | met | "
          "first recall, hybrid (embeds every memory) |")
    print("|---|---|---|---|---|---|")
    targets = {10_000: 10.0, 100_000: 30.0}
    for r in results:
        target = targets.get(r["size"])  # type: ignore[arg-type]
        met = "" if target is None else ("yes" if r["wordllama_p50"] <= target else "NO")  # type: ignore[operator]
        print(f"| {r['size']:,} | {r['none_p50']:.2f} ms | {r['wordllama_p50']:.2f} ms | "
              f"{'<= %g ms' % target if target else ''} | {met} | {r['wordllama_first_s']:.1f} s |")
    if args.quick:
        print("\n(--quick: small sizes; the latency targets apply to the full run)")


if __name__ == "__main__":
    main()
