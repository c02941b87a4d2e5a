"""Benchmark: erasing one memory from a long history, here and on a bare remote.

    python bench/purge.py                          # 10,000 memories, 20,000 commits, 5 purges
    python bench/purge.py --memories 1000 --commits 2000 --runs 3   # a smoke run

The history is written with ``git fast-import`` (memsite's own writes would take most of an hour to
make 20,000 commits): a ``memsite init`` repository, then one commit per new memory in memsite's
file format and commit-message format, then updates of memories already written, to the commit count.
The clone has a bare remote on the same disk. Each run purges a different memory written in the
middle of the history (created, updated, forgotten), pushing the rewritten branch with a lease.

* memsite: ``MemoryStore.purge`` (plan, rewrite, tombstone, push, refs, expiry, catalog rebuilt);
* baseline: the floor any rewrite and expiry pays, measured on the same repository in the same run:
  ``git fast-export --no-data --all | git fast-import`` into a scratch ref, then ``git gc --prune=now``.

Target: <= 60 s a purge on 2 cores.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # (what it prints also goes into docs/benchmarks.md)
from corpus import Corpus

from memsite import Memory, MemoryStore
from memsite.foundation.fileformat import format_memory
from memsite.foundation.record import slugify

START = datetime(2026, 1, 5, tzinfo=UTC)


def git(repo: Path, *args: str, data: bytes | None = None) -> str:
    result = subprocess.run(["git", *args], cwd=repo, input=data, capture_output=True, check=True)
    return result.stdout.decode()


def history(repo: Path, memories: int, commits: int) -> list[str]:
    """Append ``commits`` commits to ``repo``'s main, ``memories`` of them new memories; their ids."""
    corpus, rng = Corpus(seed=memories), random.Random(7)
    out: list[bytes] = []
    made: list[tuple[Memory, str]] = []
    tip = git(repo, "rev-parse", "main").strip()
    for n in range(commits):
        when = START + timedelta(minutes=n)
        if n < memories:
            text = corpus.text()
            mid = f"01J{n:023d}"
            memory = Memory(id=mid, category=corpus.category(), abstract=text.split(".")[0][:80], content=text,
                            agent="bench", created=when, updated=when)
            path = (f"content/memories/{memory.category}/{when:%Y-%m}/001/"
                    f"{slugify(memory.abstract)}-{mid[-6:].lower()}.md")
            made.append((memory, path))
            verb = "Remember"
        else:
            index = rng.randrange(len(made))
            memory, path = made[index]
            memory = memory.replace(content=memory.content + f" Seen again on {when:%Y-%m-%d}.", updated=when)
            made[index] = (memory, path)
            verb = "Update"
        body = format_memory(memory).encode()
        message = (f"{verb} {memory.category}: {memory.abstract}\n\nMemory-Id: {memory.id}\n"
                   f"Category: {memory.category}\nAction: {'created' if verb == 'Remember' else 'updated'}\n").encode()
        stamp = int(when.timestamp())
        out += [b"commit refs/heads/main", b"committer bench <bench@agents.memsite> %d +0000" % stamp,
                b"data %d" % len(message), message]
        if n == 0:
            out.append(f"from {tip}".encode())
        out += [f"M 100644 inline {path}".encode(), b"data %d" % len(body), body, b""]
    git(repo, "fast-import", "--quiet", data=b"\n".join(out) + b"\n")
    git(repo, "reset", "-q", "--hard", "main")
    return [memory.id for memory, _ in made]


def timed(work) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def baseline(repo: Path) -> None:
    exported = subprocess.run(["git", "fast-export", "--no-data", "--refspec=refs/heads/main:refs/bench/floor",
                               "refs/heads/main"], cwd=repo, capture_output=True, check=True).stdout
    git(repo, "fast-import", "--quiet", "--force", data=exported)
    git(repo, "update-ref", "-d", "refs/bench/floor")
    git(repo, "gc", "--prune=now", "--quiet")


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--commits", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memsite-purge-") as folder:
        work, bare = Path(folder) / "memory", Path(folder) / "remote.git"
        with MemoryStore.init(work, agent="bench"):
            pass
        started = time.perf_counter()
        ids = history(work, args.memories, args.commits)
        git(Path(folder), "clone", "-q", "--bare", str(work), str(bare))
        git(work, "remote", "add", "origin", str(bare))
        git(work, "fetch", "-q", "origin")
        git(work, "gc", "--quiet")
        print(f"history: {args.memories:,} memories, {args.commits:,} commits, written in "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
        floor, purges = [], []
        with MemoryStore(work, agent="bench") as store:
            store.rebuild_index()
            for run in range(args.runs):
                floor.append(timed(lambda: baseline(work)))
                victim = ids[len(ids) // 2 + run * 7]
                store.forget(victim, reason="erasure request")
                purges.append(timed(lambda v=victim, n=run: store.purge(v, reason=f"erasure request {n}")))
                print(f"  run {run + 1}: purge {purges[-1]:.1f} s, floor {floor[-1]:.1f} s", file=sys.stderr)
    print(f"\nPurge of one memory: {args.memories:,} memories, {args.commits:,} commits, {args.runs} runs, "
          "a bare remote on the same disk")
    print(f"| {'what':<58} | {'p50 s':>6} | {'p95 s':>6} |")
    print(f"|{'-' * 60}|{'-' * 8}|{'-' * 8}|")
    print(f"| {'memsite purge (rewrite, push with lease, expire, catalog)':<58} | "
          f"{statistics.median(purges):6.1f} | {p95(purges):6.1f} |")
    print(f"| {'baseline: fast-export|fast-import + gc --prune=now':<58} | "
          f"{statistics.median(floor):6.1f} | {p95(floor):6.1f} |")
    report.publish("purge", skip=args.memories < 10_000 or args.commits < 20_000)


if __name__ == "__main__":
    main()
