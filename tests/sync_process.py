"""An agent in its own clone, writing and syncing (for the concurrent sync test).

    python -m tests.sync_process CLONE AGENT COUNT [EVERY]

Prints ``ACK <id> <commit>`` for each memory written, syncing every EVERY writes (3).
"""

from __future__ import annotations

import sys

from memsite import MemoryStore
from memsite.api import storage_of
from memsite.features.sync import sync


def main() -> None:
    clone, agent, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    every = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    with MemoryStore(clone, agent=agent) as store:
        for n in range(count):
            m = store.remember(f"{agent} learned fact {n}: service {agent}-{n} listens on port {9000 + n}",
                               category="entities", dedupe=False)
            print(f"ACK {m.id} {m.commit}", flush=True)
            if n % every == every - 1:
                sync(storage_of(store))
            store.world.merge({f"agent.{agent}.progress": str(n + 1)})
        sync(storage_of(store))


if __name__ == "__main__":
    main()
