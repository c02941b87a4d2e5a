"""memsite.git.checkout: a commit on the checked-out branch leaves the working tree and the index as ``git commit``
of the same files would, keeps what a person staged, refuses a person's edits, and a write cut short is put back
to what the branch says.

(Hooks, checkouts racing writes, killed writers: tests/test_git_locks.py, tests/test_concurrency.py.)
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from memsite.foundation.errors import InvalidInput
from memsite.git import Repository
from memsite.git.checkout import BACKGROUND_FILES

from .conftest import WHEN, commit_files, fsck, memsite_commit, run, text


def index_matches_files(repo: Path) -> None:
    """Every index entry's stat data is the file's as it is (git needs to hash nothing again)."""
    path = ""
    for line in text(repo, "ls-files", "--debug").splitlines():
        if not line.startswith("  "):
            path = line
        elif line.strip().startswith("mtime:"):
            seconds, nanos = line.split()[1].split(":")
            assert int(seconds) * 1_000_000_000 + int(nanos) == os.stat(repo / path).st_mtime_ns, path
        elif "size:" in line:
            assert int(re.search(r"size: (\d+)", line)[1]) == os.stat(repo / path).st_size, path  # type: ignore[index]


def test_a_commit_on_the_checked_out_branch_is_what_git_shows_with_index_and_files_in_step(
        opened: Repository, repo: Path) -> None:
    commit_files(repo, {"a/old.md": b"old\n", "a/gone.md": b"gone\n"})
    parent = text(repo, "rev-parse", "HEAD").strip()
    sha = memsite_commit(opened, {"a/old.md": b"old, edited\n", "a/gone.md": None, "b/c/new.md": b"new\n"},
                         "Remember a thing\n\nMemory-Id: m1")
    assert sha == text(repo, "rev-parse", "HEAD").strip()
    assert text(repo, "log", "-1", "--format=%P|%an|%ae|%at|%cn|%B", "HEAD").strip() == \
        f"{parent}|planner|planner@memsite.invalid|{WHEN}|planner|Remember a thing\n\nMemory-Id: m1"
    assert text(repo, "diff-tree", "-r", "--name-status", "--no-commit-id", "HEAD").splitlines() == [
        "D\ta/gone.md", "M\ta/old.md", "A\tb/c/new.md"]
    assert (repo / "b" / "c" / "new.md").read_bytes() == b"new\n" and not (repo / "a" / "gone.md").exists()
    assert text(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert text(repo, "diff-index", "--cached", "HEAD") == ""
    assert text(repo, "reflog", "-1", "--format=%gs", "main") == "memsite: Remember a thing\n"
    index_matches_files(repo)
    fsck(repo)


@pytest.mark.parametrize("split", [False, True], ids=["index", "split index"])
def test_a_large_commit_with_files_written_ahead_leaves_the_checkout_as_git_would(opened: Repository, repo: Path,
                                                                                  split: bool) -> None:
    if split:
        run(repo, "config", "core.splitIndex", "true")
        run(repo, "update-index", "--split-index")
    files: dict[str, bytes | None] = {f"memories/{i // 50:03d}/{i:04d}.md": b"memory %d\n" % i
                                      for i in range(BACKGROUND_FILES * 3)}
    ahead = opened.files_ahead()
    ahead.add((path, data) for path, data in files.items() if data is not None and int(path[-7:-3]) % 2)
    memsite_commit(opened, files, "Import", ahead=ahead)
    assert text(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert set(text(repo, "ls-files").split()) == {"README.md", *files}
    assert all((repo / path).read_bytes() == data for path, data in files.items())
    assert os.listdir(repo / ".memsite" / "ahead") == []  # every file written ahead was placed
    index_matches_files(repo)
    fsck(repo)


def test_what_a_person_staged_stays_staged_and_their_edit_is_refused_not_overwritten(opened: Repository,
                                                                                      repo: Path) -> None:
    commit_files(repo, {"mine.md": b"the person's file\n"})
    (repo / "staged.md").write_text("staged by the person\n")
    run(repo, "add", "staged.md")
    memsite_commit(opened, {"memory.md": b"memsite's\n"}, "Remember")
    assert text(repo, "status", "--porcelain").splitlines() == ["A  staged.md"]
    assert text(repo, "show", "HEAD:memory.md") == "memsite's\n"
    (repo / "mine.md").write_text("edited, not committed\n")
    head = text(repo, "rev-parse", "HEAD")
    with pytest.raises(InvalidInput, match="mine.md"):
        memsite_commit(opened, {"mine.md": b"memsite's version\n"}, "Over the edit")
    assert text(repo, "rev-parse", "HEAD") == head and (repo / "mine.md").read_text() == "edited, not committed\n"
    # Bytes the writer itself left uncommitted there (working memory) are its own to commit.
    opened.write_working_file("notes/draft.md", b"a draft\n")
    memsite_commit(opened, {"notes/draft.md": b"a draft, final\n"}, "Draft", owned={"notes/draft.md": b"a draft\n"})
    assert text(repo, "show", "HEAD:notes/draft.md") == "a draft, final\n"
    assert sorted(text(repo, "status", "--porcelain").splitlines()) == [" M mine.md", "A  staged.md"]


def test_a_write_cut_short_is_put_back_to_the_branch_by_the_next_writer(repo: Path) -> None:
    (repo / ".git" / "info" / "exclude").write_text(".memsite/\n")
    commit_files(repo, {"a.md": b"a\n", "b.md": b"b\n"})
    first = Repository(repo)
    first.journal.begin(["a.md", "b.md", "c.md"], "refs/heads/main")  # then killed, half way through its files
    (repo / "a.md").write_text("half of the write\n")
    (repo / "b.md").unlink()
    (repo / "c.md").write_text("a file the write added\n")
    first.close()
    second = Repository(repo)
    try:
        with second.locked():
            pass
    finally:
        second.close()
    assert text(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert (repo / "a.md").read_text() == "a\n" and (repo / "b.md").read_text() == "b\n"
    fsck(repo)
