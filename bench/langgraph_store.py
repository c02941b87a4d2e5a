"""Benchmark: MemsiteStore (LangGraph's BaseStore over a memsite repository) at 10,000 items.

    python bench/langgraph_store.py            # 10,000 items, 300 of each operation
    python bench/langgraph_store.py --quick    # 2,000 items, 100 of each

put (a new item or an update of one, each a git commit), get, search with a
query (memsite's recall within a namespace prefix) and search with a filter,
beside LangGraph's InMemoryStore holding the same items in the same run (a
dict in memory, nothing written anywhere; without an embedder it ignores a
query and returns the first items: the floor, not a rival). Not named
bench/langgraph.py: that would shadow the langgraph package.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import report
from corpus import Corpus
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore
from recall import percentile

from memsite import MemoryStore
from memsite.integrations.langgraph import MemsiteStore

USERS = 100


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)



def item(corpus: Corpus, rng: random.Random) -> dict[str, Any]:
    return {"memory": corpus.text(), "kind": rng.choice(["pref", "fact", "event"]), "n": rng.randrange(10)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2,000 items, 100 of each operation")
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / ".tmp",
                        help="where to create the repository (default: bench/.tmp)")
    args = parser.parse_args()
    size, calls = (2_000, 100) if args.quick else (10_000, 300)
    args.dir.mkdir(parents=True, exist_ok=True)
    corpus, rng = Corpus(seed=size), random.Random(size)
    seed = [PutOp(("users", f"u{i % USERS}"), f"k{i}", item(corpus, rng)) for i in range(size)]
    rows: list[tuple[str, list[float], list[float]]] = []
    with tempfile.TemporaryDirectory(prefix="memsite-langgraph-", dir=args.dir) as tmp:
        memory = MemoryStore.init(Path(tmp) / "memory", agent="bench")
        graph, reference = MemsiteStore(memory), InMemoryStore()
        log(f"seeding {size:,} items (batches of 5,000, a commit each) ...")
        for start in range(0, size, 5_000):
            graph.batch(seed[start:start + 5_000])
            reference.batch(seed[start:start + 5_000])
        graph.get(("users", "u0"), "k0")  # opens the catalog and reads the items once

        def both(label: str, make: Callable[[Any], list[Callable[[], Any]]]) -> None:
            log(f"{label}: {calls} calls ...")
            state = rng.getstate()
            ours = report.timed(make(graph))
            rng.setstate(state)  # the reference gets the very same calls
            rows.append((label, ours, report.timed(make(reference))))

        def puts(store: Any, new: bool) -> list[Callable[[], Any]]:
            made = []
            for n in range(calls):
                key = f"new{n}" if new else f"k{rng.randrange(size)}"
                value = item(corpus, rng)
                made.append(lambda n=n, key=key, value=value: store.put(("users", f"u{n % USERS}"), key, value))
            return made

        queries = [corpus.query() for _ in range(calls)]
        both("put, a new item (a commit)", lambda store: puts(store, True))
        both("put, an update (a commit)", lambda store: puts(store, False))
        both("get", lambda store: [lambda i=rng.randrange(size): store.get(("users", f"u{i % USERS}"), f"k{i}")
                                   for _ in range(calls)])
        both("search with a query, one user's namespace", lambda store: [
            lambda q=q, u=rng.randrange(USERS): store.search(("users", f"u{u}"), query=q, limit=5) for q in queries])
        both("search with a query, all users", lambda store: [
            lambda q=q: store.search(("users",), query=q, limit=5) for q in queries])
        both("search with a filter, one user's namespace", lambda store: [
            lambda u=rng.randrange(USERS): store.search(("users", f"u{u}"), filter={"kind": "pref"}, limit=10)
            for _ in range(calls)])
        memory.close()

    targets = {"put, a new item (a commit)": 10.0, "put, an update (a commit)": 10.0,
               "search with a query, one user's namespace": 15.0, "search with a query, all users": 15.0}
    print(f"\nmemsite LangGraph store benchmark ({sys.platform}, Python {sys.version.split()[0]}, "
          f"langgraph {metadata.version('langgraph')}): {size:,} items, {calls} calls each\n")
    print("| operation | MemsiteStore p50 | p95 | InMemoryStore p50 | p95 | target (p50) | met |")
    print("|---|---|---|---|---|---|---|")
    for label, ours, theirs in rows:
        p50, target = statistics.median(ours), targets.get(label)
        met = "" if target is None else ("yes" if p50 <= target else "NO")
        print(f"| {label} | {p50:.2f} ms | {percentile(ours, 95):.2f} ms | {statistics.median(theirs):.3f} ms | "
              f"{percentile(theirs, 95):.3f} ms | {'' if target is None else f'<= {target:g} ms'} | {met} |")
    if args.quick:
        print("\n(--quick: a small repository; the targets apply to the full run)")
    report.publish("langgraph-store", skip=args.quick)


if __name__ == "__main__":
    main()
