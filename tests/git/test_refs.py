"""memsite.git.refs: branches memsite moves are where git finds them, and refs git wrote read as git reads them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsite.foundation.errors import RepositoryError
from memsite.git.locks import Locks
from memsite.git.refs import RefMoved, Refs
from memsite.git.settings import GitSettings

from .conftest import fsck, init, run, text

IDENT = "Planner <planner@memsite.invalid> 1764230400 +0000"


def refs_of(repo: Path, timeout: float = 10.0) -> Refs:
    git_dir = repo / ".git"
    return Refs(git_dir, git_dir, Locks(git_dir, repo, timeout), GitSettings())


def new_commit(repo: Path, parent: str, message: str) -> str:
    """A commit object on top of ``parent`` (same tree), made by git, that no ref points at yet."""
    return text(repo, "commit-tree", f"{parent}^{{tree}}", "-p", parent, "-m", message).strip()


def reflog(repo: Path, ref: str) -> list[str]:
    """``<new id> <old id> <message>`` of each reflog entry of ``ref``, newest first, as git reads them."""
    return text(repo, "log", "-g", "--format=%H %gs", ref, "--").splitlines()


def test_a_branch_memsite_moves_is_where_git_finds_it_with_a_reflog_git_reads(repo: Path) -> None:
    refs = refs_of(repo)
    first = refs.read("refs/heads/main")
    assert first == text(repo, "rev-parse", "main").strip()
    second = new_commit(repo, first, "second")
    refs.update("refs/heads/main", second, first, ident=IDENT, message="commit: second")
    assert text(repo, "rev-parse", "main").strip() == second
    # The branch's reflog and HEAD's (HEAD points at it), as git itself reads and shows them.
    assert reflog(repo, "refs/heads/main")[0] == f"{second} commit: second"
    assert reflog(repo, "HEAD")[0] == f"{second} commit: second"
    assert text(repo, "reflog", "show", "--format=%gn <%ge>", "-1", "main").strip() == \
        "Planner <planner@memsite.invalid>"
    assert text(repo, "status", "--porcelain") == ""  # (the index still matches: the tree did not change)
    assert not list((repo / ".git" / "refs").rglob("*.lock"))
    fsck(repo)  # (fsck reads the reflogs too)


def test_a_new_branch_in_a_new_folder_gets_its_folder_and_reflog_as_git_makes_them(repo: Path) -> None:
    refs = refs_of(repo)
    head = refs.read("refs/heads/main")
    refs.update("refs/heads/agent/planner", head, None, ident=IDENT, message="branch: created")
    assert text(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/agent").strip() == \
        f"refs/heads/agent/planner {head}"
    assert reflog(repo, "refs/heads/agent/planner") == [f"{head} branch: created"]
    assert reflog(repo, "HEAD")[0] != f"{head} branch: created"  # HEAD is main's: its log is left alone
    fsck(repo)


def test_a_ref_moved_by_git_meanwhile_is_not_moved_and_nothing_is_written(repo: Path) -> None:
    refs = refs_of(repo)
    first = refs.read("refs/heads/main")
    theirs, ours = new_commit(repo, first, "theirs"), new_commit(repo, first, "ours")
    run(repo, "update-ref", "-m", "by hand", "refs/heads/main", theirs, first)
    logged = reflog(repo, "refs/heads/main")
    with pytest.raises(RefMoved, match="refs/heads/main moved"):
        refs.update("refs/heads/main", ours, first, ident=IDENT, message="commit: ours")
    with pytest.raises(RefMoved):  # 'must not exist yet'
        refs.update("refs/heads/main", ours, None, ident=IDENT, message="commit: ours")
    assert text(repo, "rev-parse", "main").strip() == theirs
    assert reflog(repo, "refs/heads/main") == logged
    assert not list((repo / ".git" / "refs").rglob("*.lock"))


def test_packed_refs_git_wrote_are_read_and_moved(repo: Path) -> None:
    first = text(repo, "rev-parse", "main").strip()
    run(repo, "branch", "feature")
    run(repo, "tag", "-a", "-m", "a tag", "v1")  # an annotated tag: packed-refs gets a peeled '^' line
    run(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "feature").exists()
    refs = refs_of(repo)
    assert refs.read("refs/heads/feature") == first
    assert refs.read("refs/tags/v1") == text(repo, "rev-parse", "v1").strip()  # the tag object, not the peeled commit
    assert refs.read("refs/heads/none") is None
    later = new_commit(repo, first, "later")
    refs.update("refs/heads/feature", later, first, ident=IDENT, message="commit: later")
    assert text(repo, "rev-parse", "feature").strip() == later
    run(repo, "pack-refs", "--all")  # git takes the loose ref back into packed-refs
    assert refs_of(repo).read("refs/heads/feature") == later
    fsck(repo)


def test_head_as_git_leaves_it_symbolic_detached_and_unborn(tmp_path: Path, repo: Path) -> None:
    refs = refs_of(repo)
    head = text(repo, "rev-parse", "HEAD").strip()
    assert (refs.head_target(), refs.head_commit()) == ("refs/heads/main", head)
    run(repo, "checkout", "-q", "--detach")
    assert (refs.head_target(), refs.head_commit()) == (None, head)
    fresh = refs_of(init(tmp_path / "fresh"))
    assert (fresh.head_target(), fresh.head_commit(), fresh.read("refs/heads/main")) == ("refs/heads/main", None, None)


def test_a_symbolic_ref_git_wrote_is_followed(repo: Path) -> None:
    run(repo, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
    assert refs_of(repo).read("refs/heads/alias") == text(repo, "rev-parse", "main").strip()


def test_memsite_holding_a_ref_lock_makes_git_fail_and_a_git_lock_makes_memsite_wait_then_say_so(repo: Path) -> None:
    refs = refs_of(repo, timeout=0.3)
    first = refs.read("refs/heads/main")
    later = new_commit(repo, first, "later")
    held = refs.locks.acquire(repo / ".git" / "refs" / "heads" / "main")
    try:
        result = subprocess.run(["git", "update-ref", "refs/heads/main", later, first], cwd=repo,
                                capture_output=True, text=True)
        assert result.returncode != 0 and "cannot lock ref" in result.stderr
    finally:
        held.rollback()
    # A lock git holds (a 'git update-ref' in progress): waited for, then reported by name, never removed.
    git_lock = repo / ".git" / "refs" / "heads" / "main.lock"
    git_lock.write_text(f"{later}\n")
    with pytest.raises(RepositoryError, match=r"refs/heads/main\.lock is held by another git process"):
        refs.update("refs/heads/main", later, first, ident=IDENT, message="commit: later")
    assert git_lock.read_text() == f"{later}\n"
    git_lock.unlink()
    refs.update("refs/heads/main", later, first, ident=IDENT, message="commit: later")
    assert text(repo, "rev-parse", "main").strip() == later


@pytest.mark.parametrize("packed", [False, True], ids=["loose", "packed"])
@pytest.mark.parametrize(("existing", "new"), [("agent", "agent/planner"), ("agent/planner", "agent")],
                         ids=["under-another-branch", "named-as-a-folder-of-branches"])
def test_a_branch_whose_name_clashes_with_another_is_refused_as_git_refuses_it(repo: Path, packed: bool, existing: str,
                                                                              new: str) -> None:
    """A branch under another branch's name, or named as the folder of other branches: git keeps one of the two."""
    run(repo, "branch", existing)
    if packed:
        run(repo, "pack-refs", "--all")
    head = text(repo, "rev-parse", "HEAD").strip()
    by_git = subprocess.run(["git", "update-ref", f"refs/heads/{new}", head], cwd=repo, capture_output=True, text=True)
    assert by_git.returncode != 0 and "refs/heads/agent/planner" in by_git.stderr
    if new == "agent/planner":
        assert "cannot create 'refs/heads/agent/planner'" in by_git.stderr
    before = text(repo, "for-each-ref")
    with pytest.raises(RepositoryError, match=f"cannot create refs/heads/{new}: refs/heads/{existing} exists"):
        refs_of(repo).update(f"refs/heads/{new}", head, None, ident=IDENT, message="branch: created")
    assert text(repo, "for-each-ref") == before
    assert not list((repo / ".git" / "refs").rglob("*.lock"))


_PART = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x2FF, blacklist_characters="~^:?*[\\/.\x7f"),
                min_size=1, max_size=10).filter(lambda part: "@{" not in part)
_BRANCH = st.lists(_PART, min_size=1, max_size=3).filter(lambda parts: parts[0] != "main").map("/".join)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(_BRANCH, min_size=1, max_size=4, unique=True))
def test_branches_of_any_name_git_allows_are_created_by_memsite_and_listed_by_git(repo: Path,
                                                                                  names: list[str]) -> None:
    names = [name for name in names if not any(o != name and o.startswith(f"{name}/") for o in names)]
    head = text(repo, "rev-parse", "main").strip()
    refs = refs_of(repo)
    try:
        for name in names:
            run(repo, "check-ref-format", f"refs/heads/{name}")  # (the strategy only makes names git allows)
            refs.update(f"refs/heads/{name}", head, refs.read(f"refs/heads/{name}"), ident=IDENT, message="branch")
        # (split on newlines alone: names may hold characters Python counts as line breaks)
        listed = text(repo, "for-each-ref", "--format=%(refname)", "refs/heads").rstrip("\n").split("\n")
        assert {f"refs/heads/{name}" for name in names} <= set(listed)
        assert all(refs.read(ref) == head for ref in listed)
    finally:
        for name in names:  # (the next example starts from main alone)
            run(repo, "update-ref", "-d", f"refs/heads/{name}", check=False)
