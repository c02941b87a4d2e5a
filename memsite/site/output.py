"""Where a site build writes: a fresh folder beside the site, swapped in only once it is whole.

A build never writes into the site being served. It writes into
``.<site>.building-<pid>/`` next to it (the same file system, so the swap is
a rename) and, once every page, memory page and the search index are there,
exchanges the two folders in one ``renameat2(RENAME_EXCHANGE)`` (two renames
where the system has none). Until that moment the previous site is whole; a
build that fails removes its folder, and one that is interrupted (Ctrl-C) or
killed leaves its folder behind with the record it began with, which the next
build and ``memsite doctor`` report, and remove.

A site of 100,000 memories is 100,000 folders: making them again, even as
hard links, costs a minute a build. So the site a build replaces is not
removed but kept beside it as ``.<site>.spare/``, and the next build starts
from that folder (``recycled``): it keeps its memory pages and search index
(moved aside to ``KEPT`` names while the generator writes the rest afresh),
and rewrites only the memory pages that differ from what they should be now.
A page is never written in place (a spare shares its files with the site
being served, as hard links): a page that changes is removed and written
anew. The spare is only ever the site before the served one, whole; a build
that stops leaves its folder behind as before, never a spare.

Every built site holds ``.memsite-site.json``: which memsite built it, with
which engine. No MkDocs import here: ``build`` and ``plugin`` call it.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..features.doctor import Finding
from ..foundation.config import read_mkdocs_yml
from ..foundation.errors import MemsiteError
from ..git.commands import Git
from ..git.locks import Owner, current_owner, is_dead

STAMP = ".memsite-site.json"  # in every built site
RECORD = ".memsite-build.json"  # in a build's folder while it is written
_BUILDING = re.compile(r"^\.(?P<site>.+)\.building-(?P<pid>\d+)$")
_OLD = re.compile(r"^\.(?P<site>.+)\.old-(?P<pid>\d+)-\d+$")
# What a recycled spare keeps while the generator writes the rest: site path -> where it waits meanwhile.
KEPT = {"m": ".memsite-kept-m", "pagefind": ".memsite-kept-pagefind", ".memsite-pages.json": ".memsite-kept-pages.json"}


def version() -> str:
    from .. import __version__

    return __version__


@dataclass(frozen=True)
class Leftover:
    """The folder of a build that did not finish: who ran it, when, and how it ended."""

    path: Path
    site: Path
    pid: int
    started: str
    ended: str  # "stopped (killed or interrupted)", "interrupted (Ctrl-C)"; "running" while alive

    def sentence(self) -> str:
        return (f"the build of {self.site} started {self.started} (process {self.pid}) was {self.ended}; "
                f"{self.site} still holds the build before it")


def check_target(site_dir: Path) -> None:
    """Refuse a site folder a build cannot replace whole: a file, a symlink, a folder of other files.

    Raises:
        MemsiteError: one line naming the folder and what to do.
    """
    if site_dir.is_symlink():
        raise MemsiteError(f"{site_dir}: is a symlink to {os.readlink(site_dir)}; a build replaces the site folder "
                           "whole and does not follow links: remove the link, or build into the folder it names "
                           "with --site-dir")
    if site_dir.exists() and not site_dir.is_dir():
        raise MemsiteError(f"{site_dir}: is a file, not a folder; move it away, or build into another --site-dir")
    if site_dir.is_dir() and not (site_dir / STAMP).is_file() and not (site_dir / "index.html").is_file() \
            and any(site_dir.iterdir()):
        raise MemsiteError(f"{site_dir}: holds files no site build wrote (no index.html, no {STAMP}); a build "
                           "would replace them: move them away, or build into another --site-dir")


def built_by(site_dir: Path) -> dict[str, str] | None:
    """What ``site_dir/.memsite-site.json`` says (memsite version, engine), or None (none, or unreadable)."""
    try:
        data = json.loads((site_dir / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def leftovers(site_dir: Path) -> list[Leftover]:
    """The folders of builds of ``site_dir`` that did not finish (or are still running)."""
    parent, found = site_dir.parent, []
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    for name in sorted(names):
        match = _BUILDING.match(name)
        if not match or match["site"] != site_dir.name:
            continue
        path = parent / name
        if not (path / RECORD).exists():
            continue  # (a site swapped out by a finished build, before its renaming: Build._remove_swapped_out)
        try:
            record = json.loads((path / RECORD).read_text(encoding="utf-8"))
            owner = Owner(int(record["pid"]), str(record["process_started"]), str(record["host"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a folder this code wrote: never memsite's to remove
        ended = "running" if not is_dead(owner) else str(record.get("ended") or "stopped (killed or interrupted)")
        found.append(Leftover(path, site_dir, owner.pid, str(record.get("started", "?")), ended))
    return found


def previous_site(folder: Path) -> Path | None:
    """The site whose unchanged pages the build writing into ``folder`` keeps: the one it replaces, built by
    this memsite; None for a clean build (``--clean``), a first one, or a folder that is no build's."""
    try:
        record = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    reuse = record.get("reuse") if isinstance(record, dict) else None
    return Path(reuse) if isinstance(reuse, str) and (Path(reuse) / STAMP).is_file() else None


def spare_of(site_dir: Path) -> Path:
    """Where the site before ``site_dir``'s is kept for the next build to start from."""
    return site_dir.parent / f".{site_dir.name}.spare"


def throw_away(path: Path, folder: Path) -> None:
    """Remove ``path`` (a folder of many files inside the build's ``folder``): moved out beside the site at once and
    removed in the background (a removed search index is 100,000 files); removed here when ``folder`` is no build's."""
    try:
        site = Path(json.loads((folder / RECORD).read_text(encoding="utf-8"))["site"])
    except (OSError, ValueError, KeyError, TypeError):
        discard(path, quiet=True)
        return
    aside = site.parent / f".{site.name}.old-{os.getpid()}-{time.monotonic_ns()}"
    os.rename(path, aside)
    remove_later(aside)


def link_tree(source: Path, target: Path) -> bool:
    """Make ``target`` a copy of the folder ``source`` made of hard links (``cp -al``: a tenth of the time of
    the same in Python); False where it cannot (nothing left at ``target`` then)."""
    if not source.is_dir() or shutil.which("cp") is None:
        return False
    if subprocess.run(["cp", "-al", str(source), str(target)], capture_output=True).returncode != 0:
        discard(target, quiet=True)
        return False
    return True


def rewritten(root: Path, site_dir: Path) -> tuple[str | None, bool]:
    """(the commit the repository at ``root`` is at, whether ``site_dir`` was built from a history rewritten
    since: its commit is not an ancestor of that one, or is gone). (None, False) outside a git repository."""
    git = Git(root)
    head = git.run("rev-parse", "-q", "--verify", "HEAD^{commit}")
    commit = head.stdout.strip() if head.returncode == 0 else None
    built = (built_by(site_dir) or {}).get("commit")
    if commit is None or not isinstance(built, str) or not built:
        return commit, False
    return commit, git.run("merge-base", "--is-ancestor", built, commit).returncode != 0


def remove_later(folder: Path) -> None:
    """Remove ``folder`` in a process of its own that the build does not wait for (a site may be 100,000 files)."""
    subprocess.Popen([sys.executable, "-c", "import shutil, sys; shutil.rmtree(sys.argv[1], ignore_errors=True)",
                      str(folder)], start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)


class Build:
    """One build of ``site_dir``: :meth:`begin` gives the folder to write into, :meth:`finish` swaps it in.

    A build that fails calls :meth:`abort`, which removes the folder (after
    Ctrl-C it keeps the build's record, so the next build says so).
    """

    def __init__(self, site_dir: Path, engine: str, *, reuse: bool = True, commit: str | None = None,
                 erased: bool = False) -> None:
        self.site_dir = Path(os.path.abspath(site_dir))
        self.engine = engine
        self.commit = commit  # the commit the site is built from, in its stamp (see rewritten)
        # erased: the history was rewritten since the site was built (a purge): nothing of it is kept, not even
        # as the next build's spare, for it may hold what was erased (its search index is compressed: no grep
        # finds the text there)
        self.erased = erased
        self.reuse = reuse and not erased  # pages of the site it replaces that did not change are kept (False: --clean)
        self.folder = self.site_dir.parent / f".{self.site_dir.name}.building-{os.getpid()}"
        self.spare = spare_of(self.site_dir)
        self.notes: list[str] = []  # what the build found (an interrupted build before it), one line each

    def begin(self) -> Path:
        """Check the target, clear what earlier builds left, make the build's folder; returns it.

        Raises:
            MemsiteError: the target cannot be replaced whole, or another build of it is running.
        """
        check_target(self.site_dir)
        try:
            self.site_dir.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MemsiteError(f"{self.site_dir.parent}: cannot create it ({exc.strerror}); build into another "
                               "--site-dir") from None
        for left in leftovers(self.site_dir):
            if left.ended == "running" and left.path != self.folder:
                raise MemsiteError(f"{self.site_dir}: process {left.pid} is building it (since {left.started}); "
                                   "wait for it to finish")
            if left.path != self.folder:
                self.notes.append(left.sentence())
                self._set_aside(left.path)
        self._remove_swapped_out()
        (self.site_dir / RECORD).unlink(missing_ok=True)  # (a build killed right after its swap)
        previous = built_by(self.site_dir)
        if self.erased:
            self.notes.append(f"the history was rewritten since {self.site_dir} was built (a purge): it is built "
                              "again whole, and nothing of the previous site is kept")
        elif previous is not None and previous.get("memsite") != version():
            self.notes.append(f"{self.site_dir} was built by memsite {previous.get('memsite')} (this is "
                              f"{version()}): it is built again whole")
        reuse = self.reuse and previous is not None and previous.get("memsite") == version()
        shutil.rmtree(self.folder, ignore_errors=True)
        spare = built_by(self.spare) if reuse and self.spare.is_dir() and not self.spare.is_symlink() else None
        recycled = spare is not None and spare.get("memsite") == version()
        try:
            if recycled:
                os.rename(self.spare, self.folder)
            else:
                if self.spare.is_dir() and not self.spare.is_symlink():
                    self._set_aside(self.spare)  # (another version's, or a --clean build: not kept)
                self.folder.mkdir(parents=True)
        except OSError as exc:
            raise MemsiteError(f"{self.folder}: cannot create it ({exc.strerror}); build into another "
                               "--site-dir") from None
        owner = current_owner()
        self._record({"pid": owner.pid, "process_started": owner.started, "host": owner.host,
                      "started": f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC", "memsite": version(),
                      "engine": self.engine, "site": str(self.site_dir),
                      "reuse": str(self.site_dir) if reuse else None, "recycled": recycled})
        if recycled:
            self._clear_recycled()
        return self.folder

    def _clear_recycled(self) -> None:
        """In the spare this build starts from: set its memory pages and search index aside (``KEPT``), and move
        the rest out, to be removed in the background (thousands of list pages: the generator writes them again)."""
        (self.folder / STAMP).unlink(missing_ok=True)
        for name, aside in KEPT.items():
            if (self.folder / name).exists():
                os.rename(self.folder / name, self.folder / aside)
        rest = [entry.name for entry in os.scandir(self.folder)
                if entry.name != RECORD and entry.name not in KEPT.values()]
        if rest:
            trash = self.site_dir.parent / f".{self.site_dir.name}.old-{os.getpid()}-{time.monotonic_ns()}"
            trash.mkdir()
            for name in rest:
                os.rename(self.folder / name, trash / name)
            remove_later(trash)

    def _set_aside(self, folder: Path) -> None:
        """Rename ``folder`` out of the way and remove it in the background (it may hold a whole site)."""
        aside = self.site_dir.parent / f".{self.site_dir.name}.old-{os.getpid()}-{time.monotonic_ns()}"
        os.rename(folder, aside)
        remove_later(aside)

    def _remove_swapped_out(self) -> None:
        """Remove the old sites that finished builds swapped out, where the process removing one was stopped."""
        for name in os.listdir(self.site_dir.parent):
            path = self.site_dir.parent / name
            match = _OLD.match(name) or (_BUILDING.match(name) if not (path / RECORD).exists() else None)
            if match and match["site"] == self.site_dir.name and is_dead(Owner(int(match["pid"]), "-", _host())):
                remove_later(path)

    def _record(self, data: dict[str, object]) -> None:
        (self.folder / RECORD).write_text(json.dumps(data), encoding="utf-8")

    def finish(self) -> None:
        """Put the finished build in place of the site in one step; the old site is removed afterwards."""
        (self.folder / STAMP).write_text(json.dumps({"memsite": version(), "engine": self.engine,
                                                     "commit": self.commit}) + "\n", encoding="utf-8")
        for aside in KEPT.values():  # (what the build did not take back: a recycled page or index not needed)
            discard(self.folder / aside, quiet=True)
        old = self.site_dir.parent / f".{self.site_dir.name}.old-{os.getpid()}-{time.monotonic_ns()}"
        if not self.site_dir.is_dir():
            os.rename(self.folder, self.site_dir)
        elif _exchange(self.folder, self.site_dir):
            os.rename(self.folder, old)
        else:  # no atomic exchange on this system: for a moment there is no site
            os.rename(self.site_dir, old)
            os.rename(self.folder, self.site_dir)
        (self.site_dir / RECORD).unlink()
        if old.exists():
            if not self.erased and not self.spare.exists() and built_by(old) is not None:
                os.rename(old, self.spare)  # the next build starts from it
            else:
                remove_later(old)

    def abort(self, interrupted: bool) -> None:
        """Remove what the build wrote; an interrupted one leaves its record for the next build to report."""
        if not self.folder.is_dir():
            return
        record = self.folder / RECORD
        try:
            data = json.loads(record.read_text(encoding="utf-8")) if interrupted else None
        except (OSError, ValueError):
            data = None
        if data is None:
            discard(self.folder, quiet=True)
            return
        for entry in os.scandir(self.folder):
            if entry.name != RECORD:
                discard(Path(entry.path), quiet=True)
        self._record({**data, "ended": "interrupted (Ctrl-C)"})


def discard(path: Path, *, quiet: bool = False) -> None:
    """Remove ``path``, a folder (its files too), a file or a link, if it is there; ``quiet``: a folder's files
    that cannot be removed are left (cleaning up after a build rather than making one)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=quiet)
    else:
        path.unlink(missing_ok=True)


def _host() -> str:
    return current_owner().host


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one step (Linux ``renameat2``); False where the system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def is_build_folder(path: Path) -> bool:
    """Whether ``path`` is the folder of a build under way (the plugin then leaves the swap to who made it)."""
    return _BUILDING.match(path.name) is not None


def findings(root: Path) -> list[Finding]:
    """``memsite doctor``: each build of the repository's site that did not finish (or is running)."""
    try:
        configured = read_mkdocs_yml(root / "mkdocs.yml").get("site_dir")
    except MemsiteError:
        configured = None
    site_dir = root / (configured if isinstance(configured, str) and configured else "site")
    found = []
    for left in leftovers(Path(os.path.abspath(site_dir))):
        if left.ended == "running":
            found.append(Finding("note", f"{left.site}: being built by process {left.pid} (since {left.started})",
                                 problem=False))
        else:
            found.append(Finding("site", f"{left.path.name}: {left.sentence()}; --fix removes what it left",
                                 fixable=True, path=left.path))
    return found


def repair(found: list[Finding]) -> list[str]:
    """Remove what the unfinished builds among ``found`` left; one line per folder removed."""
    done = []
    for finding in found:
        if finding.kind == "site" and finding.path is not None:
            discard(finding.path, quiet=True)
            done.append(f"removed {finding.path.name}, left by an unfinished site build")
    return done
