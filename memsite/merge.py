"""memsite's git merge drivers: what they are called, and how each merges.

git needs two things per driver: ``.gitattributes`` naming it for some paths
(committed; ``memsite init`` writes it) and a ``merge.<name>.driver`` command in
each clone's own config (git never takes that from the repository). Every
store registers the commands when it opens, so a fresh clone is ready before
its first merge. GitHub's merge button runs no custom driver: merge or rebase
locally (``memsite sync``) so it has nothing left to merge.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from . import world
from .errors import FormatError


@dataclass(frozen=True)
class Driver:
    name: str  # merge.<name>.driver in git config
    kind: str  # the argument of 'memsite merge-driver'
    description: str


WORLD = Driver("memsite-world", "world", "memsite: merge world state key by key")
DRIVERS = (WORLD,)


def command(driver: Driver) -> str:
    """The command git runs: this Python, so the driver works without memsite on PATH."""
    return f"{shlex.quote(sys.executable)} -m memsite merge-driver {driver.kind} %O %A %B %P"


def gitattributes(content_dir: str) -> str:
    """The ``.gitattributes`` lines that route files to the drivers."""
    return (
        "# memsite merge drivers; each clone registers the commands itself (git keeps them per clone)\n"
        f"/{content_dir}/world_state.md merge={WORLD.name}\n"
    )


def run(kind: str, base: Path, ours: Path, theirs: Path, label: str = "") -> int:
    """Merge ``theirs`` into ``ours`` in place (git's %A), given ``base``.

    Returns:
        0 when the merge is clean, 1 when a conflict was written into ``ours``.
    """
    if kind != WORLD.kind:
        raise ValueError(f"unknown merge driver {kind!r}")
    texts = [path.read_bytes().decode("utf-8", "surrogateescape") for path in (base, ours, theirs)]
    try:
        merged, conflicts = world.three_way(*texts)
    except FormatError:
        # Not a file memsite can read as keyed sections (yet): merge it as git would.
        result = subprocess.run(["git", "merge-file", "-L", "ours", "-L", "base", "-L", "theirs",
                                 str(ours), str(base), str(theirs)], capture_output=True)
        return 0 if result.returncode == 0 else 1
    ours.write_bytes(merged.encode("utf-8", "surrogateescape"))
    if conflicts:
        where = f" in {label}" if label else ""
        print(f"memsite: world state keys changed on both sides{where}: {', '.join(conflicts)}", file=sys.stderr)
        return 1
    return 0
