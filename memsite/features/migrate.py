"""``memsite migrate``: memory files moved to the numbered folders of their month, all in one commit.

memsite used to keep a category's memories in one flat folder
(``memories/<category>/<file>.md``), then in one folder per month
(``memories/<category>/<YYYY-MM>/<file>.md``); a busy month put 25,000 files
in one folder, and every write rewrote its tree. Memories now live in
``memories/<category>/<YYYY-MM>/<NNN>/<file>.md``, the month they were
created and a numbered folder of at most ``segment_size`` files. Every layout
is read, so a repository keeps working until it migrates. A migration moves
files without changing a byte, a name or an id; the site addresses a memory
by category and month of creation, so its links hold.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..foundation.config import SEGMENT_FOLDER, Config, place_of
from ..foundation.errors import FormatError
from ..foundation.record import Memory
from ..storage.reading import read_memory

if TYPE_CHECKING:
    from ..git import ObjectDatabase
    from ..storage import Storage
    from ..storage.transaction import Transaction

CHUNK = 1000  # files read per batch: how often progress is reported


@dataclass(frozen=True)
class Migration:
    """What a migration moved, and the commit that did (None when nothing had to move)."""

    memories: int
    archived: int
    commit: str | None


@dataclass(frozen=True)
class _Move:
    path: str
    to_folder: str | None  # its month folder; None: an archived file, placed once its creation month is read
    archived: bool
    memory: Memory | None = None  # as the catalog has it; archived ones are read from the file


def migrate(store: Storage, progress: Callable[[int, int], None] | None = None) -> Migration:
    """Move every memory (and archived memory) not in a numbered folder of its month there, in one commit.

    Files of the flat and the month layout, and any in the wrong month
    folder, move to ``<category folder>/<YYYY-MM>/<NNN>/`` of ``memories/``
    (or ``archive/``), the month being when the memory was created (UTC),
    oldest first into the month's last numbered folder with room, as new
    memories are written (see :meth:`Transaction.segment`). The commit
    names each memory (``Memory-Id``, ``Category``, ``Action: migrated``).
    Running it again finds nothing to move and commits nothing.
    Interrupted, it leaves the repository as it was: the commit lands whole
    or not at all.

    Args:
        progress: called as (files read, files to read) while the files to move are read.

    Returns:
        How many memories and archived memories moved, and the commit.

    Raises:
        FormatError: an archived file of the flat layout cannot be read (the message names file and field);
            one in a month folder is left where it is.
        MemsiteError: a file is already where one would move; nothing is written.
    """
    message = "Migrate memories to the numbered folders of their month"
    tx, counts = store.write(lambda tx: _stage(store, tx, progress), message=message)
    return Migration(counts[0], counts[1], tx.commit)


def _stage(store: Storage, tx: Transaction, progress: Callable[[int, int], None] | None) -> tuple[int, int]:
    config, objects = store.config, store.repo.objects
    root = store.repo.root_tree(tx.parent)
    moves = _misplaced(store) + _archived(config, objects, root)
    counts = [0, 0]
    for start in range(0, len(moves), CHUNK):
        chunk = moves[start : start + CHUNK]
        entries = [objects.lookup(root, move.path) for move in chunk]
        blobs = objects.read_blobs([entry.sha for entry in entries if entry is not None])
        for move, entry in zip(chunk, entries):
            assert entry is not None  # the catalog and the walk read this same commit
            data = blobs[entry.sha]
            memory = move.memory or _read_archived(config, move, data)  # the catalog read the memories at this commit
            if memory is None:
                continue
            month = move.to_folder or config.memory_folder(config.category(memory.category), memory.created,
                                                           archived=True)
            if not in_segment(move.path, month):
                name = move.path.rsplit("/", 1)[1]
                tx.relocate(move.path, f"{tx.segment(month)}/{name}", data, memory, archived=move.archived)
                counts[move.archived] += 1
        if progress is not None:
            progress(start + len(chunk), len(moves))
    return counts[0], counts[1]


def in_segment(path: str, month_folder: str) -> bool:
    """Whether the file ``path`` is in a numbered folder of ``month_folder`` (``<month_folder>/<NNN>/<name>``)."""
    folder, _, segment = path.rpartition("/")[0].rpartition("/")
    return folder == month_folder and SEGMENT_FOLDER.fullmatch(segment) is not None


def _misplaced(store: Storage) -> list[_Move]:
    """Memories whose file is not in a numbered folder of their category's folder for the month they were created.

    Oldest first, so that each month's numbered folders fill in the order the memories were made.
    """
    config, moves = store.config, []
    for memory in sorted(store.catalog.list(), key=lambda m: (m.created, m.id)):  # synced to the transaction's base
        assert memory.path is not None
        path = memory.path.relative_to(store.root).as_posix()
        folder = config.memory_folder(config.category(memory.category), memory.created)
        if not in_segment(path, folder):
            moves.append(_Move(path, folder, False, memory))
    return moves


def _archived(config: Config, objects: ObjectDatabase, root: bytes | None) -> list[_Move]:
    """Every archived memory (``archive/<category>/[<YYYY-MM>/[<NNN>/]]<file>.md``): its month is read from the file.

    Archived memories are not in the catalog, so each file is read to learn
    where it belongs; those already there are left as they are.
    """
    archive = objects.lookup(root, config.archive_dir)
    if archive is None or not archive.is_tree:
        return []
    return [_Move(f"{config.archive_dir}/{rel}", None, archived=True)
            for rel, _ in objects.walk(archive.sha) if place_of(rel) is not None]


def _read_archived(config: Config, move: _Move, data: bytes) -> Memory | None:
    """The archived memory in ``data``; None for one in a month folder that cannot be read (it stays there).

    Raises:
        FormatError: an archived file of the flat layout cannot be read, so its month is unknown.
    """
    rel = move.path.removeprefix(f"{config.archive_dir}/")
    try:
        return read_memory(config, move.path, rel, data)
    except FormatError:
        if place_of(rel).month is None:  # type: ignore[union-attr]  # _archived chose a memory file
            raise
        return None
