"""Benchmark: faults injected into real memory repositories, and what survived them.

    python bench/faults.py            # 20 kills of each kind
    python bench/faults.py --kills 5  # quicker

Real processes and real git, as tests/test_faults.py (the faults and checks
are shared: tests/faults.py). SIGKILL at random moments of ``remember`` loops,
transactions, task closes, ``memsite build`` and ``memsite migrate``; each
``.memsite/`` file (and its -wal, -shm) truncated, filled with garbage, and
filled with garbage after its intact 100-byte header; reads through the CLI
on a full disk (a 3 MB tmpfs, when it can be mounted), then a write; every
hostile value an API caller can pass; a site built with symlinks to a host
file and folder holding a marker. After each fault: every acknowledged
memory reads back, ``git status`` and ``git fsck --strict`` are clean, no lock
file is left, the next write works, no traceback. Run from the repository
root with ``PYTHONPATH=$PWD``.

Targets: 0 acknowledged memories lost, 0 tracebacks, 0 wedged stores, 0 host
bytes in a built site.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import report

from tests import faults


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=20, help="kills of each kind")
    parser.add_argument("--seed", type=int, default=20261123)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rows: list[tuple[str, faults.Tally, str]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        log(f"killing remember loops x{args.kills} ...")
        rows.append(("SIGKILL in remember()", faults.kill_writers(faults.new_repository(work / "r"), args.kills, rng),
                     "memories"))
        log(f"killing transactions x{args.kills} ...")
        rows.append(("SIGKILL in a transaction (5 per commit)",
                     faults.kill_writers(faults.new_repository(work / "t"), args.kills, rng, batch=5), "memories"))
        log(f"killing task closes x{args.kills} ...")
        rows.append(("SIGKILL in task close loops",
                     faults.kill_tasks(faults.new_repository(work / "k"), args.kills, rng),
                     "sessions"))
        log(f"killing builds x{args.kills} ...")
        build_repo = faults.new_repository(work / "b")
        faults.kill_writers(build_repo, 1, rng)
        rows.append(("SIGKILL in memsite build", faults.kill_builds(build_repo, args.kills, rng), "memories"))
        log(f"killing migrations x{args.kills} ...")
        ids = faults.flat_repository(work / "flat", 300)
        rows.append(("SIGKILL in memsite migrate (300 files)",
                     faults.kill_migrations(work / "flat", work, ids, args.kills, rng), "memories"))
        log("damaging derived files ...")
        template = work / "derived"
        memory_ids = faults.damaged_template(template)
        damaged = faults.Tally()
        warned = 0
        for name in faults.DERIVED_FILES:
            for how in faults.DAMAGE:
                failures, warnings = faults.damaged_file_round(template, work, name, how, memory_ids, rng)
                one = faults.Tally()
                faults._tally(one, failures, len(memory_ids))
                damaged.add(one)
                warned += len(warnings)
        rows.append((f"damaged .memsite/ files, 3 shapes ({warned} warnings)", damaged, "memories"))
        log("reads on a full disk ...")
        try:
            disk = faults.mount_small_disk(work / "disk")
        except OSError as exc:
            log(f"  skipped: {exc}")
        else:
            try:
                rows.append(("reads on a full disk, then a write", faults.full_disk_round(disk, work / "site"),
                             "memories"))
            finally:
                faults.unmount(disk)
        log("hostile values ...")
        hostile = faults.try_hostile(faults.new_repository(work / "h"))
        log("a site with symlinks to the host ...")
        host_bytes = faults.host_bytes_in_site(faults.new_repository(work / "s"), work / "host")
    total = faults.Tally()
    for _, tally, _ in rows:
        total.add(tally)
    print()
    print(f"{'fault':<52} {'injected':>8} {'survived':>8} {'acked':>7} {'lost':>5} {'tracebacks':>10} {'wedged':>6}")
    for label, tally, unit in rows:
        print(f"{label:<52} {tally.injected:>8} {tally.survived:>8} {tally.acknowledged:>7} {tally.lost:>5} "
              f"{tally.tracebacks:>10} {tally.wedged:>6}  ({unit})")
    print(f"{'total':<52} {total.injected:>8} {total.survived:>8} {total.acknowledged:>7} {total.lost:>5} "
          f"{total.tracebacks:>10} {total.wedged:>6}")
    print()
    print(f"bad inputs tried: {hostile.injected}; refused with a MemsiteError, nothing committed: {hostile.survived}; "
          f"tracebacks: {hostile.tracebacks}")
    print(f"host bytes in a site built with symlinks to host files: {host_bytes}")
    print(f"({time.perf_counter() - started:.0f} s)")
    for failure in total.failures + hostile.failures:
        print(f"FAILED: {failure}")
    report.publish("faults")


if __name__ == "__main__":
    main()
