"""The stash: ``refs/stash`` and its reflog, one entry a stash (``stash@{0}`` the newest).

Each entry names a commit of the working tree whose parents are the commit
the stash was made on, a commit of the index and, with ``-u``, one of the
untracked files. Entries are written again here as other commits (a history
rewritten under them) the way git's own ``reflog delete --rewrite`` writes a
reflog: under the ref's lock, then the log's, the log replaced whole; the
entries keep their order, dates and who made them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from .refs import Refs

STASH = "refs/stash"


def entries(common_dir: Path) -> list[str]:
    """The commit of each stash entry, newest first (``stash@{0}``, ``stash@{1}``...); [] without a stash."""
    try:
        lines = (common_dir / "logs" / STASH).read_bytes().splitlines()
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [line.split(b" ", 2)[1].decode("ascii", "replace") for line in reversed(lines) if line.count(b" ") >= 2]


def replace(refs: Refs, moved: Mapping[str, str], message: Callable[[str], str]) -> bool:
    """Make each stash entry naming a commit of ``moved`` name the commit it maps to, with the message
    ``message(new commit)`` (``git stash list`` shows it); ``refs/stash`` too. Other entries stay as they are.

    Safe to run again after a kill: a log or ref already written names no commit of ``moved``.

    Returns:
        Whether anything changed.
    """
    common_dir, locks = refs.common_dir, refs.locks
    log, ref = common_dir / "logs" / STASH, common_dir / STASH
    if not moved or not log.is_file():
        return False
    ref_lock = locks.acquire(ref)
    try:
        log_lock = locks.acquire(log)
        try:
            lines, changed = [], False
            for line in log.read_bytes().splitlines(keepends=True):
                fields = line.split(b" ", 2)
                old, new = (field.decode("ascii", "replace") for field in fields[:2]) if len(fields) == 3 else ("", "")
                if old in moved or new in moved:
                    ident, tab, said = fields[2].partition(b"\t")
                    if new in moved:
                        said = " ".join(message(moved[new]).split()).encode("utf-8", "surrogateescape") + b"\n"
                    line = f"{moved.get(old, old)} {moved.get(new, new)} ".encode() + ident + tab + said
                    changed = True
                lines.append(line)
            if changed:
                log_lock.write(b"".join(lines))
                log_lock.commit()
        finally:
            log_lock.rollback()
        current = refs.read(STASH)
        if current is not None and current in moved:  # (after the log: a kill between leaves it to the next run)
            ref_lock.write(f"{moved[current]}\n".encode())
            ref_lock.commit()
            changed = True
    finally:
        ref_lock.rollback()
    locks.drop_retired()
    return changed

