"""``memsite migrate`` killed at a named point of the migration, for the fault suite and bench/faults.py.

    python -m tests.migrate_process REPO POINT

It sends itself SIGKILL (as ``kill -9`` would) at that point; only calls made
while the migration runs count, so each point lands mid-migration. The points,
in the order a migration passes them:
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import Any

import memsite.features.migrate as migrate
from memsite import MemoryStore
from memsite.cli import main
from memsite.git import checkout, worktree
from memsite.git.refs import Refs
from memsite.storage.transaction import Transaction
from tests import kill_points

KILL_POINTS: dict[str, tuple[Any, str, int]] = {
    # point: (owner, attribute, the call of the migration after which it is killed)
    "moves-listed": (migrate, "_misplaced", 1),  # the catalog read, nothing staged
    "first-file-staged": (Transaction, "relocate", 1),
    "files-staged": (Transaction, "relocate", 100),  # some files staged, not all (the fault suite moves 150)
    "journal-begun": (worktree.Journal, "begin", 1),
    "index-started": (checkout, "IndexUpdate", 1),
    "ref-moved": (Refs, "update", 1),  # the commit made, the working tree and index not yet caught up
    "index-done": (worktree.IndexUpdate, "wait", 1),
}


def arm(point: str) -> None:
    running = [False]
    original: Callable[..., Any] = MemoryStore.migrate

    def migrating(*args: Any, **kwargs: Any) -> Any:
        running[0] = True
        try:
            return original(*args, **kwargs)
        finally:
            running[0] = False

    MemoryStore.migrate = migrating  # type: ignore[method-assign]
    kill_points.arm(*KILL_POINTS[point], signal.SIGKILL, counts=lambda: running[0])


if __name__ == "__main__":
    repo, point = sys.argv[1:]
    arm(point)
    main(["-C", repo, "--agent", "migrator", "migrate"])
