"""memsite.git.stash: the stash's entries as git lists them, and entries written again that git reads as its own."""

from __future__ import annotations

from pathlib import Path

from memsite.git import stash

from .conftest import fsck, run, text
from .test_refs import refs_of


def stash_three(repo: Path) -> list[str]:
    """Three stash entries of edits to README.md; their commits, newest first."""
    for n in (1, 2, 3):
        (repo / "README.md").write_text(f"# notes\n\ndraft {n}\n")
        run(repo, "stash", "push", "-q", "-m", f"draft {n}")
    return text(repo, "stash", "list", "--format=%H").split()


def again(repo: Path, entry: str, message: str) -> str:
    """The stash commit ``entry`` written again, same tree and parents, as a rewrite would: its new id."""
    parents = [p for sha in text(repo, "rev-list", "--no-walk", "--parents", entry).split()[1:] for p in ("-p", sha)]
    return text(repo, "commit-tree", f"{entry}^{{tree}}", *parents, "-m", message).strip()


def test_the_entries_are_the_stash_list_newest_first(repo: Path) -> None:
    assert stash.entries(repo / ".git") == []
    commits = stash_three(repo)
    assert stash.entries(repo / ".git") == commits


def test_an_entry_written_again_keeps_its_place_and_git_reads_the_stash_as_its_own(repo: Path) -> None:
    commits = stash_three(repo)
    listed = text(repo, "stash", "list", "--date=raw", "--format=%gd %gn %gs").splitlines()
    new = again(repo, commits[1], "On main: draft 2 (written again)")

    assert stash.replace(refs_of(repo), {commits[1]: new}, lambda sha: text(repo, "log", "-1", "--format=%s", sha))

    after = text(repo, "stash", "list", "--date=raw", "--format=%gd %gn %gs").splitlines()
    assert after[0] == listed[0] and after[2] == listed[2]
    assert after[1] == listed[1].replace("draft 2", "draft 2 (written again)")  # its place, date and author kept
    assert text(repo, "rev-parse", "stash@{1}").strip() == new
    assert "draft 2" in text(repo, "stash", "show", "-p", "stash@{1}")
    assert not stash.replace(refs_of(repo), {commits[1]: new}, lambda sha: "")  # once only: a second run finds none
    run(repo, "stash", "drop", "-q", "stash@{1}")  # git's own reflog rewrite after ours
    assert text(repo, "stash", "list", "--format=%H").split() == [commits[0], commits[2]]
    fsck(repo)


def test_the_newest_entry_moves_the_stash_ref_packed_or_not(repo: Path) -> None:
    commits = stash_three(repo)
    run(repo, "pack-refs", "--all")
    new = again(repo, commits[0], "On main: draft 3 (written again)")

    stash.replace(refs_of(repo), {commits[0]: new}, lambda sha: "On main: draft 3 (written again)")

    assert text(repo, "rev-parse", "refs/stash").strip() == new
    assert text(repo, "stash", "list", "--format=%H %gs").splitlines()[0] == f"{new} On main: draft 3 (written again)"
    run(repo, "stash", "pop", "-q")
    assert (repo / "README.md").read_text() == "# notes\n\ndraft 3\n"
    fsck(repo)
