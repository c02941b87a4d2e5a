"""memsite.git.discovery: the worktree, git folder and common git folder are found where git itself finds them,
from any folder inside, in a linked worktree and behind a ``.git`` file; a bare repository and no repository are
refused in one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memsite.foundation.errors import RepositoryError
from memsite.git.discovery import locate

from .conftest import init, run, text


def by_git(folder: Path) -> tuple[Path, Path, Path]:
    top, git_dir, common = text(folder, "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-dir",
                                "--git-common-dir").splitlines()
    return Path(top), Path(git_dir), Path(common)


def real(found: tuple[Path, Path, Path]) -> tuple[Path, ...]:
    return tuple(Path(os.path.realpath(path)) for path in found)


def test_found_where_git_finds_it_from_inside_a_worktree_and_a_linked_one(repo: Path) -> None:
    (repo / "content" / "memories").mkdir(parents=True)
    for folder in (repo, repo / "content" / "memories"):
        assert real(locate(folder)) == real(by_git(folder))
    assert real(locate(repo / ".git")) == real(by_git(repo))  # the git folder itself: its worktree
    linked = repo.parent / "linked"
    run(repo, "worktree", "add", "-q", "-b", "agent/planner", str(linked))
    (linked / "deep").mkdir()
    for folder in (linked, linked / "deep"):
        found = locate(folder)
        assert real(found) == real(by_git(folder))
        assert real(found)[2] == real((repo, repo / ".git", repo / ".git"))[2]


def test_a_dot_git_file_naming_the_git_folder_elsewhere_is_followed(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    run(tmp_path, "init", "-q", "--separate-git-dir", str(tmp_path / "elsewhere.git"), str(work))
    assert (work / ".git").is_file()
    assert real(locate(work)) == real(by_git(work))


def test_a_bare_repository_and_a_folder_in_none_are_refused_in_one_line(tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    run(tmp_path, "init", "-q", "--bare", str(bare))
    with pytest.raises(RepositoryError, match=f"^{bare}: is a bare repository; memsite needs a clone with a "
                                              "working tree$"):
        locate(bare)
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    if run(lonely, "rev-parse", "--git-dir", check=False):  # (a repository above the temporary folder)
        pytest.skip("the temporary folder is inside a git repository")
    with pytest.raises(RepositoryError, match=f"^{lonely}: not a git repository; run 'memsite init {lonely}' first$"):
        locate(lonely)
    with pytest.raises(RepositoryError, match="not a git repository"):
        locate(tmp_path / "missing")
    init(tmp_path / "fine")
    assert locate(tmp_path / "fine")[0] == tmp_path / "fine"
