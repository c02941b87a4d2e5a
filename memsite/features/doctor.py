"""``memsite doctor``: what killed writers, hand edits and damaged caches can leave, and the safe repairs.

It looks at git's lock files, memsite's temporary files, the write journal,
git's index, the derived files in ``.memsite/`` and the memory files
themselves (everything ``memsite check`` reports). Without ``--fix`` it
changes nothing. With it, it repairs only what is safe: temporary files of
memsite writers that are no longer running, an interrupted write (from the
journal, as the next write would), a missing index (rebuilt from HEAD),
damaged or stale derived files (set aside and rebuilt), the copies of
damaged files set aside earlier (removed), memories in an earlier layout
or the wrong month folder (``memsite migrate``), and memsite's own lock
files left by a writer that was killed (known by their owner records;
taken back the way the next writer would). Any other lock file is never removed: git's own
locks carry no owner, and one may belong to a ``git commit`` waiting in an
editor; the report says how to tell and what to do.
"""

from __future__ import annotations

import os
import re
import socket
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ..foundation.errors import MemsiteError
from ..git import PACK_TMP_PREFIX, Repository, keep_of, locks
from ..storage.sqlite import COMPANIONS, damaged_copies, intact, read_only, remove_copy
from .check import check_working_tree
from .migrate import migrate
from .opening import open_storage

_MEMSITE_TMP = re.compile(r"^\..+\.(\d+)\.memsite-tmp$")
_OBJECT_TMP = re.compile(r"^tmp_obj_(\d+)_\d+$")  # git's own are tmp_obj_XXXXXX: letters and digits, no '_'
_PACK_TMP = re.compile(r"^\.memsite-tmp-(\d+)-\d+\.(?:pack|idx|keep)$")
_MEMSITE_KEEP = re.compile(rb"^memsite (\d+): ")  # what a writer's .keep says (ObjectDatabase.batch)
DERIVED = ("catalog.sqlite3", "vectors.sqlite3", "past.sqlite3")  # past: the memories at a past commit (as-of reads)


@dataclass(frozen=True)
class Finding:
    """One thing found: a ``problem`` fails the doctor until it is gone; otherwise it is a note."""

    kind: str  # lock | temp | journal | index | derived | aside | files | misplaced | note
    message: str
    fixable: bool = False
    problem: bool = True
    path: Path | None = None


def diagnose(root: Path) -> list[Finding]:
    """Everything wrong (and worth knowing) in the memory repository at ``root``; changes nothing."""
    try:
        repo = Repository(root)
    except MemsiteError as exc:
        return [Finding("files", str(exc))]
    try:
        findings = [*_locks(repo), *_temp_files(repo), *_kept_packs(repo), *_journal(repo), *_index(repo),
                    *_derived(repo)]
    finally:
        repo.close()
    checked = check_working_tree(repo.root)
    findings += [Finding("files", line) for line in checked.problems]
    unwritable = read_only_folders(repo)
    if unwritable:
        findings.insert(0, Finding("note", f"{', '.join(unwritable)}: read-only for this user; the doctor reports "
                                           "without writing anything, but --fix, writes and syncs need write access "
                                           "there (reads, recall and 'memsite build --site-dir DIR' work)",
                                   problem=False))
    for line in checked.warnings:
        misplaced = "'memsite migrate'" in line
        findings.append(Finding("misplaced" if misplaced else "note", line, fixable=misplaced, problem=misplaced))
    return findings


def read_only_folders(repo: Repository) -> list[str]:
    """The folders a write needs that this process may not write: the working tree, ``.git``, ``.memsite``."""
    folders = [repo.root, repo.common_dir, repo.state_dir]
    return [str(folder) for folder in folders if folder.exists() and not os.access(folder, os.W_OK)]


def repair(root: Path, findings: list[Finding], agent: str | None = None) -> list[str]:
    """Repair the fixable findings; returns one line per repair made.

    Raises:
        MemsiteError: the repository is read-only for this process (nothing is repaired).
    """
    repo = Repository(root)
    try:
        unwritable = read_only_folders(repo)
    finally:
        repo.close()
    if unwritable:
        raise MemsiteError(f"{', '.join(unwritable)}: read-only for this user: nothing was repaired; run "
                           "'memsite doctor --fix' as a user who may write there")
    done: list[str] = []
    kinds = {f.kind for f in findings if f.fixable}
    for finding in findings:
        if finding.kind == "temp" and finding.fixable and finding.path is not None:
            finding.path.unlink(missing_ok=True)
            done.append(f"removed {finding.message.split(':', 1)[0]}")
        if finding.kind == "aside" and finding.path is not None:
            remove_copy(finding.path)
            done.append(f"removed {finding.message.split(':', 1)[0]}, a copy of a damaged file")
    repo = Repository(root)
    try:
        for finding in findings:
            if finding.kind == "lock" and finding.fixable and finding.path is not None:
                if repo.locks.take_back(finding.path):  # as a writer does: only if still a dead writer's
                    done.append(f"took back {finding.message.split(':', 1)[0]}, left by a killed memsite writer")
        if "journal" in kinds:
            with repo.locked():  # taking the lock finishes what the journal lists
                pass
            done.append("put back the files a write left out of line with the checked-out branch")
        if "index" in kinds:
            result = repo.git.run("read-tree", "HEAD")
            if result.returncode == 0:
                repo.git.run("update-index", "-q", "--refresh")
                done.append("rebuilt .git/index from HEAD (nothing was staged: it was missing)")
            else:  # most likely index.lock is there: reported on its own
                done.append(f"not done: could not rebuild .git/index: {result.stderr.strip().splitlines()[0]}")
    finally:
        repo.close()
    if kinds & {"derived", "misplaced"}:
        with open_storage(root, agent) as store:  # opening sets aside a file that cannot be opened
            if "derived" in kinds:
                healed = store.heal()
                store.rebuild_index()
                aside = f"set aside {', '.join(healed)} and " if healed else ""
                done.append(f"{aside}rebuilt the catalog and search index from git")
            if "misplaced" in kinds:
                moved = migrate(store)
                done.append(f"moved {moved.memories + moved.archived} memory files to numbered folders of their "
                            "month" + (f" in commit {moved.commit[:12]}" if moved.commit else ""))
    return done


def _locks(repo: Repository) -> Iterator[Finding]:
    """Each git lock file, by whose it is (memsite's owner records in .git/memsite-locks tell its own)."""
    now = time.time()
    paths = [path for path in sorted(_walk(repo.common_dir)) if path.name.endswith(".lock")]
    if repo.git_dir != repo.common_dir and (repo.git_dir / "index.lock").exists():
        paths.append(repo.git_dir / "index.lock")
    for path in paths:
        rel = path.relative_to(repo.root) if path.is_relative_to(repo.root) else path
        try:
            age = _age(now - path.stat().st_mtime)
        except FileNotFoundError:
            continue  # released meanwhile
        found = repo.locks.describe(path)
        if found.state == locks.DEAD and found.owner is not None:
            yield Finding("lock", f"{rel}: memsite's own lock left by a killed writer (pid {found.owner.pid}), "
                                  f"{age} old; --fix takes it back (so does the next write)", fixable=True, path=path)
        elif found.state == locks.LIVE and found.owner is not None:
            yield Finding("note", f"{rel}: held by memsite process {found.owner.pid}, which is running "
                                  "(a write in progress)", problem=False, path=path)
        else:
            yield Finding("lock", f"{rel}: git lock file, {age} old, not memsite's: a git command holds it, or one "
                                  "was killed holding it; while it is there git refuses to change what it guards. "
                                  f"memsite never removes it: if no git process is running, rm {rel}", path=path)


def _temp_files(repo: Repository) -> Iterator[Finding]:
    objects = repo.common_dir / "objects"
    candidates = [(p, _OBJECT_TMP) for p in objects.glob("??/tmp_obj_*")]
    candidates += [(p, _PACK_TMP) for p in objects.glob(f"pack/{PACK_TMP_PREFIX}*")]
    for folder, dirs, files in os.walk(repo.root):
        dirs[:] = [d for d in dirs if d != ".git"]
        candidates += [(Path(folder) / name, _MEMSITE_TMP) for name in files if name.endswith(".memsite-tmp")]
    for path, pattern in sorted(candidates):
        match = pattern.match(path.name)
        if match is None:
            continue  # git's own: git gc prunes them
        rel = path.relative_to(repo.root)
        pid = int(match.group(1))
        if not locks.is_dead(locks.Owner(pid, "-", socket.gethostname())):
            yield Finding("note", f"{rel}: being written by memsite process {pid}", problem=False)
        else:
            yield Finding("temp", f"{rel}: temporary file of a memsite writer (process {pid}) that is no longer "
                                  "running; --fix removes it", fixable=True, path=path)


def _kept_packs(repo: Repository) -> Iterator[Finding]:
    """``.keep`` files a memsite writer gives its pack until its branch moves, left by one that was killed."""
    for path in sorted((repo.common_dir / "objects" / "pack").glob("pack-*.keep")):
        match = _MEMSITE_KEEP.match(keep_of(str(path)) or b"")
        if match is None:
            continue  # git's own (receive-pack's, a person's): not memsite's to judge
        pid = int(match.group(1))
        if locks.is_dead(locks.Owner(pid, "-", socket.gethostname())):
            yield Finding("temp", f"{path.relative_to(repo.root)}: kept by memsite process {pid}, which was stopped "
                                  "before its branch moved; git's repacks leave the pack alone while it is there; "
                                  "--fix removes it", fixable=True, path=path)


def _journal(repo: Repository) -> Iterator[Finding]:
    pending = repo.journal.pending()
    if pending:
        yield Finding("journal", f"{repo.journal.path.relative_to(repo.root)}: a write was interrupted with "
                                 f"{len(pending)} file(s) to put back in line with the branch; --fix does it "
                                 "(so does the next write)", fixable=True)
    ref, left = repo.left_in_another_checkout()
    if left:
        yield Finding("journal", f"{len(left)} file(s) a write to {ref} left staged in this checkout of "
                                 f"{repo.refs.head_target()} (it met the checkout): {', '.join(left[:3])}; --fix "
                                 "takes them back out (so does the next write)", fixable=True)


def _index(repo: Repository) -> Iterator[Finding]:
    target = repo.refs.head_target()
    if target is None or (repo.git_dir / "index").exists():
        return
    if repo.refs.read(target) is not None:
        yield Finding("index", ".git/index: missing, so git status shows every file as deleted and untracked; "
                               "--fix rebuilds it from HEAD", fixable=True)


def _derived(repo: Repository) -> Iterator[Finding]:
    state = repo.state_dir
    for name in (*DERIVED, "activity.sqlite3"):
        path = state / name
        if not intact(path):
            cost = ("the recalls it holds that are not committed yet are lost" if name == "activity.sqlite3"
                    else "it is rebuilt from git")
            yield Finding("derived", f".memsite/{name}: damaged; --fix sets it aside and starts a new one ({cost})",
                          fixable=True, path=path)
    catalog = state / "catalog.sqlite3"
    if catalog.exists() and intact(catalog):
        indexed = _indexed_commit(catalog)
        ref = repo.refs.head_target()
        tip = repo.refs.read(ref) if ref else None
        if tip is not None and indexed != tip:
            yield Finding("derived", f".memsite/catalog.sqlite3: indexes {indexed[:12] if indexed else 'nothing'}, "
                                     f"the branch is at {tip[:12]}; --fix brings it up to date (any read does too)",
                          fixable=True)
    for name in (*DERIVED, "activity.sqlite3"):
        for path in damaged_copies(state / name):
            when = datetime.strptime(path.name.split(".damaged-")[1][:16], "%Y%m%dT%H%M%SZ")
            files = [path.with_name(path.name + suffix) for suffix in ("", *COMPANIONS)]
            size = sum(file.stat().st_size for file in files if file.exists())
            yield Finding("aside", f".memsite/{path.name}: a copy of the damaged file, set aside on "
                                   f"{when:%Y-%m-%d %H:%M} UTC ({size / 1e6:.1f} MB) to show what was damaged; "
                                   "--fix removes it", fixable=True, problem=False, path=path)


def _indexed_commit(path: Path) -> str | None:
    try:
        db = read_only(path)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'commit'").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def _walk(folder: Path) -> Iterator[Path]:
    for parent, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in ("objects", "logs")]
        for name in files:
            yield Path(parent) / name


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"
