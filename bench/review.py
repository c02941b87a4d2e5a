"""Benchmark: reviewing memory changes, beside `git diff --stat` of the same range, in one run.

    python bench/review.py           # 10,000 memories, 1,000 of them changed
    python bench/review.py --quick   # 2,000 memories, 200 changed, one run

A repository is seeded through the API, tagged ``base``, then 1,000 memories
change in 1,000 commits (40% created, 40% updated, 20% forgotten). Each
command runs in a fresh process, as in CI: `memsite diff base HEAD`,
`memsite check --base base` over the whole repository, and `git diff --stat
base HEAD` as the baseline. Medians of --runs runs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import report
from corpus import Corpus

from memsite import MemoryStore


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def seed(path: Path, corpus: Corpus, count: int, changed: int) -> None:
    log(f"seeding {count:,} memories ...")
    with MemoryStore.init(path, agent="bench") as store:
        ids = []
        for start in range(0, count, 5000):
            with store.transaction(f"Seed memories {start}-{min(count, start + 5000)}") as tx:
                ids += [tx.remember(corpus.text(), category=corpus.category(), dedupe=False).id
                        for _ in range(start, min(count, start + 5000))]
        subprocess.run(["git", "tag", "base"], cwd=path, check=True)
        log(f"changing {changed:,} memories, one commit each ...")
        created, updated = changed * 2 // 5, changed * 2 // 5
        for _ in range(created):
            store.remember(corpus.text(), category=corpus.category(), dedupe=False)
        for mid in ids[:updated]:
            store.update(mid, content=corpus.text(), tags=("reviewed",))
        for mid in ids[updated:updated + changed - created - updated]:
            store.forget(mid, reason="superseded")


def timed(command: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> float:
    start = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode not in ok:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}): {result.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2,000 memories, 200 changed, one run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="work folder (default: a temporary one)")
    args = parser.parse_args()
    count, changed, runs = (2_000, 200, 1) if args.quick else (10_000, 1_000, args.runs)
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="memsite-review-bench-"))
    repo = workdir / "repo"
    seed(repo, Corpus(), count, changed)
    memsite = [sys.executable, "-m", "memsite", "-C", str(repo)]
    rows = []
    for label, command, ok, target in (
        (f"memsite diff base HEAD ({changed:,} changed)", [*memsite, "diff", "base", "HEAD"], (0,), 5.0),
        (f"memsite check --base base ({count:,} memories)", [*memsite, "check", "--base", "base"], (0,), 10.0),
        ("git diff --stat base HEAD (baseline)", ["git", "diff", "--stat", "base", "HEAD"], (0,), None),
    ):
        times = []
        for n in range(runs):
            log(f"{label}, run {n + 1}/{runs} ...")
            times.append(timed(command, repo, ok))
        rows.append((label, statistics.median(times), target))
    print(f"\nReview commands, median of {runs} run(s) (2 cores):\n")
    print(f"| {'command':<48} | {'seconds':>8} | {'target':>8} | met |")
    print(f"|{'-' * 50}|{'-' * 9}:|{'-' * 9}:|-----|")
    for label, seconds, target in rows:
        met = "" if target is None else ("yes" if seconds <= target else "NO")
        print(f"| {label:<48} | {seconds:>8.2f} | {'' if target is None else f'<= {target:g} s':>8} | {met:<3} |")
    report.publish("review", skip=args.quick)


if __name__ == "__main__":
    main()
