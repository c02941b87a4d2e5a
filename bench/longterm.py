"""Benchmark: recall across a year. Is the answer found whatever its age? BM25 and cosine beside it, in one run.

    python bench/longterm.py              # the set in bench/longterm_data.py, minilm
    python bench/longterm.py --set validation   # the questions to tune on (the figures to quote are held-out)

2,580 memories a payments team's agents wrote over thirteen months (bench/longterm_data.py: facts
about services, people and customers, errors and fixes, decisions, events, and routine that
answers nothing), each committed with its own date as the store's clock, and 2,200 questions
naming the memories that answer them, as many answers in each age bucket (the last week, the last
month, six months, older). Questions are split by a hash of their text: 40 % validation (to tune
on, ``--set validation``), 60 % held-out (the figures to quote).

Rankings measured over the same memories in the same run:

* BM25: SQLite FTS5's bm25 over the memories (any of the question's words), nothing else;
* cosine: the shipped minilm's cosine similarity over every memory, nothing else;
* ``recall()`` as agents get it (relevance first, time a bounded prior), and with
  ``ranking="freshness"`` (the seed's relevance x 2^(-age/30) x boost).

Evidence recall@k: a memory that answers is among the first k. Recall counts are left at zero
(each question is asked through ``store.explain``, which counts nothing).
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report
from longterm_data import AGES, NOW, Generated, generate, written

from memsite import MemoryStore
from memsite.api import storage_of
from memsite.foundation.text import match_any, search_terms

BUCKETS = ("≤ 1 week", "≤ 1 month", "≤ 6 months", "older")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def build(path: Path, data: Generated) -> dict[str, str]:
    """A repository holding the memories, each written on its own date; generated key -> memory id."""
    ids: dict[str, str] = {}
    now = [NOW]
    with MemoryStore.init(path, agent="bench", clock=lambda: now[0]) as store:
        settings = store.root / "mkdocs.yml"  # room for a year: capacity is not what is measured
        text = (settings.read_text().replace("max_lines: 500", "max_lines: 100000")
                .replace("min_lines: 400", "min_lines: 90000"))
        settings.write_text(text)
    with MemoryStore(path, agent="bench", clock=lambda: now[0], embedder="none") as store:
        day = None
        tx = None
        for fact in data.memories:
            when = written(fact)
            if when.date() != day:
                if tx is not None:
                    tx.__exit__(None, None, None)
                day, now[0] = when.date(), when
                tx = store.transaction(f"Memories of {day}")
                tx.__enter__()
            ids[fact.key] = tx.remember(fact.text, category=fact.category, dedupe=False).id
        if tx is not None:
            tx.__exit__(None, None, None)
    return ids


def split(text: str) -> str:
    return "validation" if hashlib.sha1(text.encode()).digest()[0] < 0.4 * 256 else "held-out"


def bucket(days: float) -> str:
    for (_, high), name in zip(AGES, BUCKETS):
        if days < high:
            return name
    return BUCKETS[-1]


def answers(data: Generated, ids: dict[str, str]) -> list[tuple[str, str, set[str], float]]:
    """(kind, question, ids of every memory that answers it, the answer's age in days)."""
    by_text: dict[str, set[str]] = defaultdict(set)
    for _, question, key in data.questions:
        by_text[question].add(key)
    age = {f.key: (NOW - written(f)).total_seconds() / 86400 for f in data.memories}
    seen = set()
    out = []
    for kind, question, _ in data.questions:
        if question not in seen:
            seen.add(question)
            keys = by_text[question]
            out.append((kind, question, {ids[k] for k in keys}, min(age[k] for k in keys)))
    return out


def bm25_ranking(store: MemoryStore, question: str, limit: int) -> list[str]:
    terms = search_terms(question)
    found = storage_of(store).catalog.lexical(match_any(terms)) if terms else {}
    best = sorted(found, key=found.__getitem__, reverse=True)[:limit]
    return [storage_of(store).catalog.ids(best)[n] for n in best]


def cosine_ranking(store: MemoryStore, question: str, limit: int) -> list[str]:
    vectors = storage_of(store).vectors
    assert vectors is not None
    close = vectors.closest(storage_of(store).catalog, question, limit)
    best = sorted(close, key=close.__getitem__, reverse=True)[:limit]
    return [storage_of(store).catalog.ids(best)[n] for n in best]


def recall_ranking(ranking: str) -> Callable[[MemoryStore, str, int], list[str]]:
    def ranked(store: MemoryStore, question: str, limit: int) -> list[str]:
        return [h.memory.id for h in store.explain(question, limit=limit, ranking=ranking)
                if h.why is None or h.why.kept]
    return ranked


def evaluate(store: MemoryStore, questions: Sequence[tuple[str, str, set[str], float]],
             rank: Callable[[MemoryStore, str, int], list[str]]) -> dict[str, dict[str, float]]:
    """Row -> {"@5", "@10"}: overall, by kind and by the answer's age."""
    hits: dict[str, dict[str, list[bool]]] = defaultdict(lambda: {"@5": [], "@10": []})
    for kind, question, wanted, age in questions:
        found = rank(store, question, 10)
        for row in ("all", kind, bucket(age)):
            hits[row]["@5"].append(bool(wanted & set(found[:5])))
            hits[row]["@10"].append(bool(wanted & set(found)))
    return {row: {k: sum(v) / len(v) for k, v in parts.items()} for row, parts in hits.items()}


def latency(store: MemoryStore, questions: Sequence[tuple[str, str, set[str], float]]) -> tuple[float, float]:
    for _, question, _, _ in questions[:20]:
        store.explain(question)
    times = []
    for _, question, _, _ in questions:
        start = time.perf_counter()
        store.explain(question)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[round(0.95 * (len(times) - 1))]


def table(results: dict[str, dict[str, dict[str, float]]], rows: Sequence[str], at: str) -> str:
    names = list(results)
    lines = [f"| recall{at} | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for row in rows:
        values = [results[name].get(row, {}).get(at) for name in names]
        best = max((results[n][row][at] for n in names[:2] if row in results[n]), default=0)
        cells = []
        for name, value in zip(names, values):
            if value is None:
                cells.append("")
                continue
            cell = f"{value:.2f}"
            if name.startswith("recall()") and best:
                cell += f" ({value / best:.2f}x)"
            cells.append(cell)
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--keep", help="build the repository here (or reuse it when it is there)")
    parser.add_argument("--set", default="held-out", choices=("held-out", "validation"))
    args = parser.parse_args()
    data = generate()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep or tmp) / "memory"
        if not path.exists():
            log(f"writing {len(data.memories):,} memories over {AGES[-1][1]} days ...")
            ids = build(path, data)
            (path.parent / "ids.tsv").write_text("".join(f"{k}\t{v}\n" for k, v in ids.items()))
        ids = dict(line.split("\t") for line in (path.parent / "ids.tsv").read_text().splitlines())
        questions = [q for q in answers(data, ids) if split(q[1]) == args.set]
        log(f"{len(questions)} {args.set} questions")
        with MemoryStore(path, agent="bench", clock=lambda: NOW, embedder=args.embedder) as store:
            start = time.perf_counter()
            store.embed()
            log(f"embedded in {time.perf_counter() - start:.1f} s")
            results = {
                "BM25 (FTS5)": evaluate(store, questions, bm25_ranking),
                f"cosine ({args.embedder})": evaluate(store, questions, cosine_ranking),
                "recall()": evaluate(store, questions, recall_ranking("relevance")),
                "recall(ranking='freshness')": evaluate(store, questions, recall_ranking("freshness")),
            }
            p50, p95 = latency(store, questions)
    kinds = sorted({q[0] for q in questions})
    rows = ["all", *BUCKETS, *kinds]
    print(f"Recall across a year: {len(data.memories):,} memories over {AGES[-1][1]} days, "
          f"{len(questions)} {args.set} questions ({args.embedder})\n")
    for at in ("@5", "@10"):
        print(table(results, rows, at))
        print()
    print(f"recall() p50 {p50:.2f} ms, p95 {p95:.2f} ms (explain, {len(questions)} questions)")
    print("\ntargets: recall() recall@5 >= 1.10x the better of BM25 and cosine overall, >= 0.95x in every age bucket")
    report.publish("longterm", skip=args.set != "held-out" or args.embedder != "minilm")


if __name__ == "__main__":
    main()
