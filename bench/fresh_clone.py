"""Benchmark: how long after `git clone` does a new clone recall by meaning? Published vectors beside none.

    python bench/fresh_clone.py                   # 10,000 and 100,000 memories (the original embeds them once)
    python bench/fresh_clone.py --sizes 2000      # a smoke run
    python bench/fresh_clone.py --keep /tmp/fc    # keep the originals to run again

An original repository of generated memories (bench/corpus.py) embeds every memory with the
shipped minilm and publishes the vectors (``memsite index embed --publish``); it is made a plain
bare remote. Then, each in a fresh clone:

* memsite: ``git clone``, then the first ``memsite recall`` by meaning as a separate process
  (it builds the catalog, reads the published vectors, measures the floor, embeds the question);
* baseline: the same, with the vectors left out of the clone (as before they were published):
  the first recall embeds every memory. At 100,000 that takes over ten minutes, so it is
  measured only with ``--baseline-everywhere``; otherwise its time per memory at 10,000 is given.

Target: at 100,000 memories, first recall by meaning <= 30 s after the clone, on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report
from corpus import Corpus

from memsite import MemoryStore


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def original(path: Path, size: int) -> Path:
    """A bare remote holding ``size`` memories and their published minilm vectors."""
    bare = path / "remote.git"
    if bare.exists():
        return bare
    work = path / "original"
    with MemoryStore.init(work, agent="bench") as store:
        corpus = Corpus(seed=size)
        for start in range(0, size, 5000):
            with store.transaction(f"Memories {start}") as tx:
                for _ in range(start, min(size, start + 5000)):
                    tx.remember(corpus.text(), category=corpus.category(), dedupe=False)
            log(f"  wrote {min(size, start + 5000):,}")
    log("  embedding every memory once (minilm) ...")
    started = time.perf_counter()
    run(["memsite", "-C", str(work), "index", "embed", "--publish"], env={"MEMSITE_EMBEDDING": "minilm"})
    log(f"  embedded and published in {time.perf_counter() - started:.0f} s")
    run(["git", "clone", "-q", "--bare", str(work), str(bare)])
    return bare


def run(command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=cwd, env={**os.environ, **(env or {})},
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def fresh(bare: Path, into: Path, *, vectors: bool) -> tuple[float, float]:
    """(git clone seconds, first recall seconds) in a new clone of ``bare``."""
    clone_time = run(["git", "clone", "-q", str(bare), str(into)])
    if not vectors:  # as before vectors were published: remove them from the clone
        subprocess.run(["git", "-C", str(into), "rm", "-rq", "vectors"], check=True)
        subprocess.run(["git", "-C", str(into), "commit", "-qm", "no vectors"], check=True)
    recall_time = run(["memsite", "-C", str(into), "recall", "how do we roll back a failed deploy?"],
                      env={"MEMSITE_EMBEDDING": "minilm"})
    return clone_time, recall_time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--keep", help="keep the originals here (and reuse them)")
    parser.add_argument("--baseline-everywhere", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        keep = Path(args.keep or tmp)
        for size in sizes:
            log(f"{size:,} memories ...")
            bare = original(keep / f"o{size}", size)
            clone, first = fresh(bare, Path(tmp) / f"c{size}", vectors=True)
            baseline = None
            if args.baseline_everywhere or size == min(sizes):
                baseline = fresh(bare, Path(tmp) / f"b{size}", vectors=False)
            objects = sum(f.stat().st_size for f in (bare / "objects").rglob("*") if f.is_file())
            rows.append((size, clone, first, baseline, objects))
    per_memory = next(((b[1] / s) for s, _, _, b, _ in rows if b is not None), None)
    print(f"First recall by meaning in a fresh clone (minilm; {os.cpu_count()} cores; git clone of a bare remote)\n")
    print("| memories | git clone | memsite: first recall (published vectors) | clone + recall | "
          "baseline: first recall (embeds every memory) | remote's objects |")
    print("|---|---|---|---|---|---|")
    for size, clone, first, baseline, objects in rows:
        base = f"{baseline[1]:.1f} s" if baseline else \
            (f"~{per_memory * size:.0f} s (at {per_memory * 1000:.1f} ms a memory)" if per_memory else "")
        print(f"| {size:,} | {clone:.1f} s | {first:.1f} s | **{clone + first:.1f} s** | {base} | "
              f"{objects / 1e6:.0f} MB |")
    print("\ntarget: clone + first recall <= 30 s at 100,000")
    report.publish("fresh-clone", skip=max(sizes) < 10_000)


if __name__ == "__main__":
    main()
