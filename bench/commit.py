"""Benchmark: memsite writes beside plain git doing the same writes, in one run.

    python bench/commit.py            # the full run (10,000 memories)
    python bench/commit.py --quick    # a small smoke run

Measures, in a repository already holding 10,000 memories:
  * remember() latency p50/p95, interleaved with ``git add`` + ``git commit``
    writing the same kind of file in an identical copy of the repository
    (after 50 unmeasured writes on each side: the seed leaves every object
    in one pack, so the first loose objects also create their folders);
  * three transactions of 1,000 memories (the median), each beside ``git add``
    of 1,000 files and one ``git commit``;
  * 8 processes x 50 writes at once, beside 8 processes running
    ``git add`` + ``git commit``, each taking a lock around the pair (without
    one, concurrent git commands fail on index.lock and lose writes).

Prints a Markdown table with the targets and whether each was met.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from corpus import CATEGORIES, Corpus

from memsite import MemoryStore
from memsite.fileformat import format_memory

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "baseline", "GIT_AUTHOR_EMAIL": "baseline@example.com",
    "GIT_COMMITTER_NAME": "baseline", "GIT_COMMITTER_EMAIL": "baseline@example.com",
}


CORPUS = Corpus()


def text(i: int) -> str:
    """A realistic memory text; no two are duplicates, so remember() (dedup on) keeps each."""
    return CORPUS.text()


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def file_create_cost(folder: Path, count: int = 200) -> float:
    """Microseconds to create a small file in ``folder``: the disk condition of this run."""
    probe = Path(tempfile.mkdtemp(dir=folder))
    start = time.perf_counter()
    for i in range(count):
        (probe / f"f{i}").write_bytes(b"x" * 300)
    cost = (time.perf_counter() - start) / count * 1e6
    shutil.rmtree(probe)
    return cost


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def seed(path: Path, count: int) -> None:
    log(f"seeding {count:,} memories in {path} ...")
    with MemoryStore.init(path, agent="seed") as store:
        with store.transaction(f"Seed {count} memories") as tx:
            for i in range(count):
                tx.remember(text(i), category=CATEGORIES[i % 7], tags=[f"topic{i % 17}"])


def git_write(repo: Path, rel: str, data: str) -> None:
    (repo / rel).parent.mkdir(parents=True, exist_ok=True)
    (repo / rel).write_text(data)
    subprocess.run(["git", "add", "--", rel], cwd=repo, check=True, env=GIT_ENV)
    subprocess.run(["git", "commit", "-q", "-m", f"Add {rel}"], cwd=repo, check=True, env=GIT_ENV)


WARM_UP = 50


def bench_latency(mem: Path, base: Path, writes: int) -> tuple[list[float], list[float]]:
    log(f"remember() vs git add + git commit: {writes} writes each, interleaved ...")
    ours: list[float] = []
    theirs: list[float] = []
    texts = [text(i) for i in range(WARM_UP + writes)]  # made before the clock starts
    with MemoryStore(mem, agent="bench") as store:
        for i in range(-WARM_UP, writes):
            body = texts[i + WARM_UP]
            start = time.perf_counter()
            memory = store.remember(body, category=CATEGORIES[i % 7])
            ours.append((time.perf_counter() - start) * 1000)
            rel = memory.path.relative_to(store.root).as_posix()  # the same file in the same (month) folder
            data = format_memory(memory)
            start = time.perf_counter()
            git_write(base, rel, data)
            theirs.append((time.perf_counter() - start) * 1000)
    return ours[WARM_UP:], theirs[WARM_UP:]


def bench_transaction(mem: Path, base: Path, size: int, rounds: int) -> tuple[float, float]:
    """Median rates of ``rounds`` transactions of ``size`` memories, each side starting from a synced disk."""
    log(f"{rounds} transactions of {size:,} memories vs git add + one commit ...")
    ours, theirs = [], []
    for _ in range(rounds):
        texts = [text(i) for i in range(size)]  # made before the clock starts
        os.sync()  # no write-back of the last round left to slow this one
        with MemoryStore(mem, agent="bench") as store:
            start = time.perf_counter()
            with store.transaction(f"Import {size} memories") as tx:
                made = [tx.remember(body, category=CATEGORIES[i % 7]) for i, body in enumerate(texts)]
            ours.append(size / (time.perf_counter() - start))
        os.sync()
        start = time.perf_counter()
        rels = []
        for i, memory in enumerate(made):
            rel = memory.path.relative_to(store.root).as_posix()
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text(format_memory(memory))
            rels.append(rel)
        subprocess.run(["git", "add", "--pathspec-from-file=-"], cwd=base, check=True, env=GIT_ENV,
                       input="\n".join(rels).encode())
        subprocess.run(["git", "commit", "-q", "-m", "bulk"], cwd=base, check=True, env=GIT_ENV)
        theirs.append(size / (time.perf_counter() - start))
    return statistics.median(ours), statistics.median(theirs)


def worker(repo: str, agent: str, count: int, start_file: str, mode: str) -> None:
    """One of the concurrent writers (run as a separate process)."""
    store = MemoryStore(repo, agent=agent) if mode == "memsite" else None
    lock = os.open(Path(repo, ".git", "bench.lock"), os.O_RDWR | os.O_CREAT) if store is None else -1
    path = Path(start_file)
    while not path.exists():
        time.sleep(0.0005)
    landed = 0
    for i in range(count):
        if store is not None:
            store.remember(f"{agent} concurrent write {i}", category=CATEGORIES[i % 7])
            landed += 1
            continue
        rel = f"content/memories/events/{agent}-{i:03d}.md"
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            git_write(Path(repo), rel, f"{agent} concurrent write {i}\n")
            landed += 1
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    print(f"{time.time()} {landed}", flush=True)
    if store is not None:
        store.close()


def bench_processes(repo: Path, mode: str, processes: int, writes: int) -> tuple[float, int]:
    log(f"{processes} processes x {writes} writes at once ({mode}) ...")
    start_file = repo / ".memsite" / f"go-{mode}"
    start_file.parent.mkdir(exist_ok=True)
    procs = [
        subprocess.Popen([sys.executable, __file__, "--worker", str(repo), f"{mode}{n}", str(writes),
                          str(start_file), mode], stdout=subprocess.PIPE, text=True)
        for n in range(processes)
    ]
    time.sleep(2.0)  # let every worker open its store and wait on the start file
    begin = time.time()
    start_file.touch()
    ends, landed = [], 0
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"a {mode} worker failed")
        end, count = out.split()
        ends.append(float(end))
        landed += int(count)
    return max(ends) - begin, landed


def count_files(repo: Path, pattern: str) -> int:
    out = subprocess.run(["git", "ls-tree", "-r", "--name-only", "HEAD", "content/memories"], cwd=repo,
                         capture_output=True, text=True, check=True).stdout
    return sum(1 for line in out.splitlines() if pattern in Path(line).name)


def fsck_clean(repo: Path) -> bool:
    # git commit (and memsite) may have started a detached 'gc --auto': let it finish.
    while (repo / ".git" / "gc.pid").exists():
        time.sleep(0.1)
    return subprocess.run(["git", "fsck", "--no-progress"], cwd=repo, capture_output=True).returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / ".tmp",
                        help="where to create the repositories (default: bench/.tmp)")
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        repo, agent, count, start_file, mode = args.worker
        worker(repo, agent, int(count), start_file, mode)
        return
    memories, writes, tx_size, tx_rounds, procs, per_proc = (
        (500, 30, 200, 1, 4, 10) if args.quick else (10_000, 300, 1_000, 3, 8, 50))
    args.dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="memsite-bench-", dir=args.dir) as tmp:
        create_cost = file_create_cost(Path(tmp))
        mem, base = Path(tmp, "memsite"), Path(tmp, "baseline")
        seed(mem, memories)
        shutil.copytree(mem, base, symlinks=True)
        os.sync()  # measure writes, not the write-back of the seed and its copy
        ours, theirs = bench_latency(mem, base, writes)
        tx_ours, tx_theirs = bench_transaction(mem, base, tx_size, tx_rounds)
        os.sync()
        before = len(MemoryStore(mem, agent="bench").list())
        elapsed, landed = bench_processes(mem, "memsite", procs, per_proc)
        after = len(MemoryStore(mem, agent="bench").list())
        mem_fsck = fsck_clean(mem)
        base_elapsed, base_landed = bench_processes(base, "git", procs, per_proc)
        base_files = count_files(base, "git")
        base_fsck = fsck_clean(base)

    p50, p95, b50, b95 = (statistics.median(ours), percentile(ours, 95),
                          statistics.median(theirs), percentile(theirs, 95))
    total = procs * per_proc
    rate, base_rate = total / elapsed, base_landed / base_elapsed
    rows = [
        ("remember() p50", f"{p50:.2f} ms", f"{b50:.1f} ms", f"{b50 / p50:.1f}x faster",
         "<= 15 ms and >= 8x", p50 <= 15 and b50 / p50 >= 8),
        ("remember() p95", f"{p95:.2f} ms", f"{b95:.1f} ms", f"{b95 / p95:.1f}x faster", "", None),
        (f"transaction of {tx_size:,} (median of {tx_rounds})", f"{tx_ours:,.0f} memories/s", f"{tx_theirs:,.0f} files/s",
         f"{tx_ours / tx_theirs:.1f}x", ">= 2,000/s", tx_ours >= 2000),
        (f"{procs} processes x {per_proc} writes", f"{rate:.0f} commits/s", f"{base_rate:.0f} commits/s",
         f"{rate / base_rate:.1f}x", ">= 60 commits/s", rate >= 60),
        ("  memories on the branch", f"{after - before}/{total}", f"{base_files}/{total}", "",
         f"exactly {total}", after - before == total),
        ("  git fsck", "clean" if mem_fsck else "ERRORS", "clean" if base_fsck else "ERRORS", "", "clean", mem_fsck),
    ]
    print(f"\nmemsite commit benchmark: {memories:,} memories already in the repository, "
          f"{os.cpu_count()} cores, git {subprocess.run(['git', '--version'], capture_output=True, text=True).stdout.split()[-1]}")
    print("baseline: git add + git commit subprocesses in an identical copy of the repository")
    print(f"latency: {writes} writes each, interleaved, after {WARM_UP} unmeasured warm-up writes each")
    print(f"disk: creating a small file takes {create_cost:.0f} us here\n")
    print("| measure | memsite | baseline | ratio | target | met |")
    print("|---|---|---|---|---|---|")
    for name, a, b, ratio, target, met in rows:
        mark = "" if met is None else ("yes" if met else "NO")
        print(f"| {name} | {a} | {b} | {ratio} | {target} | {mark} |")
    if args.quick:
        print("\n(--quick: small sizes; the targets apply to the full run)")


if __name__ == "__main__":
    main()
