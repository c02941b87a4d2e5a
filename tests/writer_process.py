"""A separate writer process for the concurrency and crash tests.

    python -m tests.writer_process REPO AGENT COUNT [--start FILE] [--kill-at POINT] [--batch N]

Prints ``ACK <id> <commit>`` for each acknowledged memory (flushed at once),
so the parent knows exactly what was acknowledged before a crash. With
``--kill-at`` it sends itself SIGKILL at that point of its first write.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

from memsite import MemoryStore
from memsite.git import checkout, worktree
from memsite.git.locks import Locks
from memsite.git.refs import Refs
from tests import kill_points
from tests.kill_points import target

KILL_POINTS: dict[str, tuple[Any, str, str] | tuple[Any, str, str, Callable[[tuple[Any, ...]], bool]]] = {
    # point: (owner, attribute, "before" | "after" its first call[, which calls count])
    "git-lock-taken": (Locks, "acquire", "after"),
    "journal-begun": (worktree.Journal, "begin", "after"),
    "file-written": (checkout, "atomic_write", "after"),
    "files-written-ahead": (worktree.FilesAhead, "finish", "after"),  # (a large commit) none placed yet
    "file-placed": (worktree.FilesAhead, "place", "after"),
    "index-started": (checkout, "IndexUpdate", "after"),
    "index-lock-held": (os, "replace", "before", lambda args: target(args).endswith("/index")),
    "ref-lock-held": (os, "replace", "before", lambda args: "/refs/heads/" in target(args)),
    "ref-moved": (Refs, "update", "after"),
    "index-done": (worktree.IndexUpdate, "wait", "after"),
    "pack-written": (os, "replace", "before",  # the commit's pack in place, its index not
                     lambda args: "/objects/pack/" in target(args) and target(args).endswith(".idx")),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("repo")
    parser.add_argument("agent")
    parser.add_argument("count", type=int)
    parser.add_argument("--start")
    parser.add_argument("--kill-at", choices=sorted(KILL_POINTS))
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args()
    store = MemoryStore(args.repo, agent=args.agent)
    if args.start:
        print("READY", flush=True)  # the store is open (on the branch checked out now)
        while not os.path.exists(args.start):
            time.sleep(0.001)
    if args.kill_at:
        owner, name, when, *which = KILL_POINTS[args.kill_at]
        kill_points.arm(owner, name, before=when == "before", only=which[0] if which else lambda args: True)
    for i in range(0, args.count, args.batch):
        if args.batch == 1:
            memory = store.remember(f"{args.agent} memory {i}: observed while testing writers", category="events",
                                    dedupe=False)  # templated texts; this tests writing, not dedup
            print(f"ACK {memory.id} {memory.commit}", flush=True)
        else:
            with store.transaction(f"{args.agent} batch {i}") as tx:
                made = [tx.remember(f"{args.agent} batch {i} item {j}", category="events", dedupe=False)
                        for j in range(args.batch)]
            for memory in made:
                print(f"ACK {memory.id} {tx.commit}", flush=True)
    store.close()


if __name__ == "__main__":
    main()
