"""A purge in a process of its own, for the crash tests; or a clone's sync that follows one.

    python -m tests.purge_process REPO ID [--kill-at POINT]
    python -m tests.purge_process REPO --follow [--kill-at POINT]

With ``--kill-at`` it sends itself SIGKILL at that point of the purge (of the sync's following, with
``--follow``: a point of FOLLOW_POINTS).
"""

from __future__ import annotations

import argparse
from typing import Any

from memsite import MemoryStore
from memsite.features import expiry, following
from memsite.features import purge as purging
from memsite.git import stash
from memsite.git.remote import Remote
from memsite.storage import Storage
from tests import kill_points

KILL_POINTS: dict[str, tuple[Any, str, str]] = {  # point: (owner, attribute, "before" | "after" its first call)
    "fetched": (Remote, "fetch", "after"),
    "rewritten": (purging, "rewrite_refs", "after"),
    "tombstone-written": (purging, "_listed", "after"),
    "published": (purging, "_publish", "after"),
    "expiry-noted": (purging, "note", "after"),
    "refs-moved": (purging, "move_refs", "after"),
    "stash-rewritten": (stash, "replace", "after"),
    "reflogs-expired": (expiry, "_drop_entries", "after"),
    "objects-dropped": (expiry, "_drop_objects", "after"),
    "vectors-erased": (expiry, "_erase_vectors", "after"),
    "caches-rebuilt": (Storage, "rebuild_caches", "after"),
}
FOLLOW_POINTS: dict[str, tuple[Any, str, str]] = {  # a clone's sync, following a purge made elsewhere
    "fetched": (following, "_write_seen", "after"),  # the remote's rewritten branch fetched, nothing rewritten
    "rewritten": (following, "rewrite_refs", "after"),
    "refs-moved": (following, "move_refs", "after"),
    "objects-dropped": (expiry, "_drop_objects", "after"),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("repo")
    parser.add_argument("id", nargs="?")
    parser.add_argument("--follow", action="store_true")
    parser.add_argument("--kill-at", choices=sorted({*KILL_POINTS, *FOLLOW_POINTS}))
    args = parser.parse_args()
    if args.kill_at:
        owner, name, when = (FOLLOW_POINTS if args.follow else KILL_POINTS)[args.kill_at]
        kill_points.arm(owner, name, before=when == "before")
    if args.follow:
        with MemoryStore(args.repo, agent="coder") as store:
            print("SYNCED", store.sync().status, flush=True)
        return
    with MemoryStore(args.repo, agent="planner") as store:
        result = store.purge(args.id, reason="erasure request 118")
    print("PURGED", result.tombstone, flush=True)


if __name__ == "__main__":
    main()
