"""A git remote as memsite shares memory through it: fetch, push ref by ref, merge trees.

These run git itself (the network, credentials and the remote's hooks are
git's business) and never take memsite's repository lock: a writer in this
clone goes on while they wait for the network. Moving a local branch to a
merge of what was fetched is :meth:`Repository.merge`, which does take it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..foundation.errors import DiskFull, RepositoryError
from .commands import Git, last_line

# What git says when a ref's lock is held by another git command (a person's
# 'git fetch' beside memsite's): worth trying again, not an error to report.
BUSY = ("cannot lock ref", "unable to create", "file exists", "is at ")
# What a remote says when its ref moved while a push was on its way to it.
RACED = ("but expected", "failed to update ref", "failed to lock", "stale info")


class Unreachable(RepositoryError):
    """The remote could not be reached (or refused the connection); nothing was fetched or pushed."""


class Busy(RepositoryError):
    """Another git command held a ref this one had to update (a person's ``git fetch``): try again."""


@dataclass(frozen=True)
class Pushed:
    """What the remote did with one ref of a push."""

    ref: str  # the remote ref (refs/heads/...)
    ok: bool  # it now points at the commit pushed
    rejected: bool  # refused as not a fast-forward: someone pushed first
    reason: str  # git's words for a ref not pushed, with the remote's own message ('pre-receive hook declined: ...')


@dataclass(frozen=True)
class TreeMerge:
    """A merge of two commits as git computes it, without touching a working tree."""

    tree: bytes | None  # the merged tree (None on conflicts)
    conflicts: tuple[str, ...]  # the paths left in conflict
    detail: str  # what the merge drivers said about them (one line)
    marked: bytes | None = None  # on conflicts: the tree git wrote, conflict markers in those paths


class Remote:
    """One remote of the clone at ``root``, by name."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = root
        self.name = name

    def check(self) -> None:
        """Refuse a remote this clone does not have, in one line."""
        names = _git(self.root, "remote").stdout.split()
        if not names:
            raise RepositoryError(f"{self.root}: no git remote is configured to sync with; add one "
                                  "(git remote add origin URL) and sync again")
        if self.name not in names:
            raise RepositoryError(f"no git remote named {self.name!r}; this clone has {', '.join(names)} "
                                  "(--remote NAME)")

    def tracking(self, branch: str) -> str:
        """The ref this clone keeps the remote's ``branch`` in."""
        return f"refs/remotes/{self.name}/{branch}"

    def fetch(self, branches: Sequence[str] = (), patterns: Sequence[str] = ()) -> set[str]:
        """Bring the remote's ``branches`` (and every branch matching ``patterns``, e.g. ``agent/*``, pruning
        those the remote no longer has) into their tracking refs; returns the branches it does not have.

        Raises:
            Unreachable: the remote could not be reached.
            RepositoryError: git failed otherwise (a tracking ref locked by another git command, ...).
        """
        missing: set[str] = set()
        wanted = list(branches)
        while True:
            specs = [f"+refs/heads/{b}:{self.tracking(b)}" for b in wanted if b not in missing]
            specs += [f"+refs/heads/{p}:{self.tracking(p)}" for p in patterns]
            if not specs:
                return missing
            # (memsite's writes run git's gc now and then; a sync every few seconds need not look each time)
            args = ["fetch", "--quiet", "--no-write-fetch-head", "--no-auto-maintenance", "--no-show-forced-updates",
                    *(["--prune"] if patterns else []), self.name, *specs]
            result = _git(self.root, *args, check=False)
            if result.returncode == 0:
                return missing
            gone = [b for b in wanted
                    if b not in missing and f"couldn't find remote ref refs/heads/{b}" in result.stderr]
            if not gone:
                self.check()  # (no such remote: say so rather than 'not a git repository')
                raise _failure(self.name, "fetch", result.stderr, self.root)
            missing.update(gone)

    def push(self, updates: Mapping[str, str]) -> dict[str, Pushed]:
        """Push each commit to its branch (``{branch: commit}``); each ref succeeds or fails on its own.

        Never forces: a branch that moved on the remote is refused as git
        refuses it (``rejected``).

        Raises:
            Unreachable: the remote could not be reached; nothing was pushed.
        """
        specs = [f"{commit}:refs/heads/{branch}" for branch, commit in updates.items()]
        result = _git(self.root, "push", "--porcelain", self.name, *specs, check=False)
        said = "; ".join(line.removeprefix("remote:").strip() for line in result.stderr.splitlines()
                         if line.startswith("remote:") and line.removeprefix("remote:").strip())
        outcome: dict[str, Pushed] = {}
        for line in result.stdout.splitlines():
            flag, tab, rest = line.partition("\t")
            if not tab or len(flag) != 1:
                continue
            spec, _, summary = rest.partition("\t")
            ref = spec.rpartition(":")[2]
            ok = flag in " +*=-"
            reason = summary.partition("(")[2].rstrip(")") or summary
            # Not a fast-forward, found by this git ('fetch first') or by the remote, whose ref moved between
            # the advertisement and the update (another clone's push landed meanwhile): someone pushed first.
            rejected = flag == "!" and (summary.startswith("[rejected]") or any(word in reason for word in RACED))
            if flag == "!" and not rejected and said:
                reason = f"{reason}: {said}"
            outcome[ref.removeprefix("refs/heads/")] = Pushed(ref, ok, rejected, "" if ok else reason)
        if not outcome:
            self.check()
            raise _failure(self.name, "push", result.stderr, self.root)
        return outcome

    def unmerged(self, pattern: str, into: str) -> dict[str, str]:
        """The remote's branches matching ``pattern`` (``agent/*``), as last fetched, with commits that
        ``into`` lacks: {branch: commit}."""
        prefix = self.tracking("")
        listed = _git(self.root, "for-each-ref", f"--no-merged={into}", "--format=%(objectname) %(refname)",
                      self.tracking(pattern)).stdout
        return {ref.removeprefix(prefix): sha for sha, _, ref in (line.partition(" ") for line in listed.splitlines())}


def merge_trees(root: Path, ours: str, theirs: str) -> TreeMerge:
    """Merge two commits as ``git merge`` would (memsite's merge drivers included), writing only objects.

    Raises:
        RepositoryError: git could not merge them at all (no common history, ...).
    """
    result = _git(root, "merge-tree", "--write-tree", "--name-only", "-z", ours, theirs, check=False)
    if result.returncode not in (0, 1):
        if "write-tree" in result.stderr:  # an option git learnt in 2.38
            version = _git(root, "--version").stdout.strip()
            raise RepositoryError(f"merging needs git 2.38 or newer (git merge-tree --write-tree); this is {version}")
        if "no space left on device" in result.stderr.lower():
            raise DiskFull(f"disk full at {root}: git merge-tree could not write the merge; nothing was lost")
        raise RepositoryError(f"git merge-tree {ours[:12]} {theirs[:12]} failed: {last_line(result.stderr)}")
    first, _, rest = result.stdout.partition("\0")
    if result.returncode == 0:
        return TreeMerge(bytes.fromhex(first), (), "")
    conflicted, _, _messages = rest.partition("\0\0")
    paths = tuple(dict.fromkeys(p for p in conflicted.split("\0") if p))
    drivers = [line.removeprefix("memsite: ") for line in result.stderr.splitlines() if line.startswith("memsite: ")]
    return TreeMerge(None, paths, "; ".join(drivers), bytes.fromhex(first))


def merge_base(root: Path, one: str, other: str) -> str | None:
    """The best common ancestor of two commits (None when they share no history)."""
    result = _git(root, "merge-base", one, other, check=False)
    return result.stdout.strip() or None


def trailers(root: Path, ours: str, theirs: str, path: str,
             keys: Sequence[str]) -> tuple[list[tuple[int, str, list[tuple[str, str]]]], ...]:
    """The commits each side has that the other lacks (merges left out) that changed ``path``, newest first:
    (commit time, author, the (key, value) trailers among ``keys``), for ``ours`` and for ``theirs``; one
    ``git log``."""
    wanted = ",".join(f"key={key}" for key in keys)
    out = _git(root, "log", "--left-right", "--no-merges",
               f"--format=%x1e%m%x1f%ct%x1f%an%x1f%(trailers:{wanted},separator=%x1d)", f"{ours}...{theirs}",
               "--", path).stdout
    sides: tuple[list[tuple[int, str, list[tuple[str, str]]]], ...] = ([], [])
    for record in out.split("\x1e")[1:]:
        side, when, author, listed = (record.strip("\n").split("\x1f") + ["", "", ""])[:4]
        pairs = [tuple(part.strip() for part in item.split(":", 1)) for item in listed.split("\x1d") if ":" in item]
        sides[side != "<"].append((int(when), author, [(k, v) for k, v in pairs]))
    return sides


def ahead_behind(root: Path, mine: str, theirs: str) -> tuple[int, int]:
    """(commits ``mine`` has that ``theirs`` lacks, commits ``theirs`` has that ``mine`` lacks), in one git call."""
    if mine == theirs:
        return 0, 0
    left, right = _git(root, "rev-list", "--left-right", "--count", f"{mine}...{theirs}", "--").stdout.split()
    return int(left), int(right)


def is_ancestor(root: Path, commit: str, of: str) -> bool:
    """Whether ``commit`` is ``of`` or in its history."""
    result = _git(root, "merge-base", "--is-ancestor", commit, of, check=False)
    if result.returncode > 1:
        raise RepositoryError(f"git merge-base failed in {root}: {last_line(result.stderr)}")
    return result.returncode == 0


def count(root: Path, include: str, exclude: Sequence[str] = ()) -> int:
    """How many commits ``include`` has that none of ``exclude`` has."""
    return int(_git(root, "rev-list", "--count", include, *(f"^{e}" for e in exclude), "--").stdout)


def _failure(remote: str, what: str, stderr: str, root: Path) -> RepositoryError:
    reason = last_line(stderr, prefer="fatal:")
    if "no space left on device" in stderr.lower() or "disk quota exceeded" in stderr.lower():
        return DiskFull(f"disk full at {root}: git {what} {remote} could not write ({reason.removeprefix('fatal: ')}); "
                        "nothing acknowledged was lost: free some space and sync again")
    if any(word in stderr.lower() for word in BUSY):
        return Busy(f"git {what} {remote}: {reason}")
    return Unreachable(f"cannot reach the remote {remote} ({reason.removeprefix('fatal: ')}); "
                       f"nothing was {'fetched' if what == 'fetch' else 'pushed'}")


def _git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return Git(root).run(*args, check=check)  # (raises GitFailed: "git <command> failed in <root>: <git's last line>")
