"""Finding a repository from a folder inside it, as git does, without running git.

A store is opened far more often than git is needed, so the folders are
read here: the nearest folder at or above the one given with a ``.git``
folder, or a ``.git`` file naming one (a linked worktree's, whose
``commondir`` names the repository's own git folder).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..foundation.errors import RepositoryError


def locate(path: str | os.PathLike[str]) -> tuple[Path, Path, Path]:
    """(the worktree's top folder, its git folder, the repository's common git folder) of the worktree
    ``path`` is in, found as git finds them: the nearest folder at or above it with a ``.git`` folder, or a
    ``.git`` file naming one (a linked worktree's, whose ``commondir`` names the repository's).

    Raises:
        RepositoryError: ``path`` is in no git repository, or is a bare one.
    """
    current = os.path.abspath(path)
    if not os.path.isdir(current):
        raise RepositoryError(f"{path}: not a git repository; run 'memsite init {path}' first")
    while True:
        if is_git_dir(current) and os.path.basename(current) != ".git":
            raise RepositoryError(f"{path}: is a bare repository; memsite needs a clone with a working tree")
        git_dir = git_dir_of(os.path.join(current, ".git"))
        if git_dir is not None:
            break
        parent = os.path.dirname(current)
        if os.path.basename(current) == ".git" and is_git_dir(current):  # the git folder itself: its worktree
            current, git_dir = parent, current
            break
        if parent == current:
            raise RepositoryError(f"{path}: not a git repository; run 'memsite init {path}' first")
        current = parent
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as handle:
            common_dir = os.path.normpath(os.path.join(git_dir, handle.read().strip()))  # (often '../..')
    except (OSError, UnicodeDecodeError):
        common_dir = git_dir
    return Path(current), Path(git_dir), Path(common_dir)


def git_dir_of(dot: str) -> str | None:
    """The git folder a worktree's ``.git`` is (a folder) or names (a file: ``gitdir: <path>``), or None."""
    if os.path.isdir(dot):
        return dot if is_git_dir(dot) else None
    try:
        with open(dot, encoding="utf-8") as handle:
            text = handle.read(4096)
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir: "):
        return None
    target = os.path.normpath(os.path.join(os.path.dirname(dot), text[len("gitdir: "):].strip()))
    return target if is_git_dir(target) else None


def is_git_dir(folder: str) -> bool:
    """Whether ``folder`` is a git folder: a HEAD, and objects and refs (or a linked worktree's ``commondir``)."""
    if not os.path.isfile(os.path.join(folder, "HEAD")):
        return False
    return os.path.isfile(os.path.join(folder, "commondir")) or (
        os.path.isdir(os.path.join(folder, "objects")) and os.path.isdir(os.path.join(folder, "refs")))


__all__ = ["git_dir_of", "is_git_dir", "locate"]
