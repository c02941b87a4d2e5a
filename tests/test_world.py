"""World state: keyed sections merged, never overwritten; merged across branches by real git."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsite import FormatError, InvalidInput, MemoryStore, RepositoryError, SecretFound
from memsite.cli import main
from memsite.features.world import parse, render, three_way

from .conftest import assert_clean, checkout, git, head

keys = st.from_regex(r"[a-z][a-z0-9_.]{0,8}", fullmatch=True)
values = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=40).map(str.strip)


def test_merge_sets_keeps_and_removes_by_name(store: MemoryStore) -> None:
    store.world.merge({"deploy.target": "staging", "db.version": "14", "old.key": "x"})
    commit = store.world.merge({"db.version": 15, "ci.status": "green"}, remove=["old.key", "never.existed"])
    assert commit == head(store.root)
    assert store.world.read() == {"ci.status": "green", "db.version": "15", "deploy.target": "staging"}
    text = (store.root / "content" / "world_state.md").read_text()
    assert text.index("## ci.status") < text.index("## db.version") < text.index("## deploy.target")
    assert "## db.version\n\n15\n\n## deploy.target\n\nstaging\n" in text
    trailers = git(store.root, "log", "-1", "--format=%(trailers:only,unfold)")
    assert "World-Set: ci.status" in trailers and "World-Set: db.version" in trailers
    assert "World-Unset: old.key" in trailers and "never.existed" not in trailers
    assert git(store.root, "log", "-1", "--format=%s").strip() == "World: set ci.status, db.version; unset old.key"
    assert_clean(store.root)


def test_a_merge_that_changes_nothing_makes_no_commit(store: MemoryStore) -> None:
    store.world.merge({"a": "1"})
    before = head(store.root)
    assert store.world.merge({"a": "1"}) is None
    assert head(store.root) == before


@pytest.mark.parametrize(
    ("updates", "message"),
    [
        ({"has space": "x"}, "world key 'has space'"),
        ({"": "x"}, "world key ''"),
        ({"k": "intro\n## sneaky\nvalue"}, r"line 2: starts with '## '"),
        ({"k": ["a", "list"]}, "expected text"),
        ({"k": "x\x00y"}, "NUL"),
    ],
)
def test_bad_keys_and_values_are_refused_and_write_nothing(store: MemoryStore, updates: dict, message: str) -> None:
    store.world.merge({"kept": "yes"})
    before = head(store.root)
    with pytest.raises(InvalidInput, match=message):
        store.world.merge(updates)
    assert head(store.root) == before and store.world.read() == {"kept": "yes"}


def test_secrets_never_reach_the_world_state(store: MemoryStore) -> None:
    with pytest.raises(SecretFound, match="rule github-token"):
        store.world.merge({"ci.token": "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"})


def test_a_file_that_cannot_be_read_safely_is_never_overwritten(store: MemoryStore) -> None:
    path = store.root / "content" / "world_state.md"
    path.write_text(path.read_text() + "\n## a\n\n1\n\n## a\n\n2\n")
    git(store.root, "commit", "-qam", "a duplicate key, by hand")
    before = head(store.root)
    with pytest.raises(FormatError, match="key 'a' appears twice"):
        store.world.merge({"b": "new"})
    assert head(store.root) == before


def test_people_may_edit_the_file_and_agents_keep_their_edits(store: MemoryStore) -> None:
    store.world.merge({"a": "1"})
    path = store.root / "content" / "world_state.md"
    path.write_text(path.read_text().replace("# World state", "# World state of the deploy team")
                    + "\n## z.note\n\nby hand\n")
    git(store.root, "commit", "-qam", "hand edit")
    store.world.merge({"b": "2"})
    assert store.world.read() == {"a": "1", "b": "2", "z.note": "by hand"}
    assert path.read_text().startswith("# World state of the deploy team")


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.dictionaries(keys, values, max_size=4), st.lists(keys, max_size=2)),
                min_size=1, max_size=6))
def test_merges_never_lose_a_key_they_were_not_told_to_drop(store: MemoryStore, merges) -> None:
    expected = store.world.read()
    for updates, remove in merges:
        remove = [k for k in remove if k not in updates]
        try:
            store.world.merge(updates, remove=remove)
        except InvalidInput:  # a value that would wedge the file ('## ', conflict markers): refused whole
            assert store.world.read() == expected
            continue
        expected = {k: v for k, v in expected.items() if k not in remove}
        expected.update(updates)
        assert store.world.read() == expected


def test_threads_merging_different_keys_lose_none(store: MemoryStore) -> None:
    def work(n: int) -> None:
        with MemoryStore(store.root, agent=f"agent{n}") as mine:
            for i in range(5):
                mine.world.merge({f"agent{n}.step{i}": str(i)})

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(store.world.read()) == 20
    assert_clean(store.root)


# --- the keyed 3-way merge ---------------------------------------------------------


def test_three_way_takes_each_side_s_own_changes() -> None:
    base = render("", {"a": "1", "b": "1", "gone": "x"})
    ours = render("", {"a": "2", "b": "1", "gone": "x", "mine": "m"})
    theirs = render("", {"a": "1", "b": "3", "theirs": "t"})
    text, conflicts = three_way(base, ours, theirs)
    assert conflicts == []
    assert parse(text)[1] == {"a": "2", "b": "3", "mine": "m", "theirs": "t"}


def test_three_way_marks_only_keys_both_sides_changed_differently() -> None:
    base = render("", {"a": "1", "b": "1"})
    text, conflicts = three_way(base, render("", {"a": "2", "b": "x"}), render("", {"a": "3", "b": "x"}))
    assert conflicts == ["a"]
    assert "<<<<<<< ours\n2\n=======\n3\n>>>>>>> theirs" in text
    assert parse(text)[1]["b"] == "x"


def test_three_way_changed_against_removed_is_a_conflict() -> None:
    base = render("", {"a": "1"})
    text, conflicts = three_way(base, render("", {"a": "2"}), render("", {}))
    assert conflicts == ["a"] and "(removed)" in text


# --- with real git ---------------------------------------------------------------


def branch_setup(store: MemoryStore) -> MemoryStore:
    """main and 'feature' both from a world with keys a and z."""
    store.world.merge({"a": "first", "z": "last"})
    checkout(store, "-q", "-b", "feature")
    return store


def test_git_merge_of_two_branches_that_touched_different_keys_is_clean(store: MemoryStore) -> None:
    branch_setup(store)
    store.world.merge({"m.theirs": "from feature"})  # lands between a and z
    checkout(store, "-q", "main")
    store.world.merge({"m.ours": "from main"})  # lands between a and z too: a line merge would conflict
    result = subprocess.run(["git", "merge", "-q", "--no-edit", "feature"], cwd=store.root, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert store.world.read() == {"a": "first", "m.ours": "from main", "m.theirs": "from feature", "z": "last"}
    assert_clean(store.root)


def test_git_rebase_uses_the_driver_too(store: MemoryStore) -> None:
    branch_setup(store)
    store.world.merge({"m.feature": "rebased"})
    checkout(store, "-q", "main")
    store.world.merge({"m.main": "upstream"})
    checkout(store, "-q", "feature")
    result = subprocess.run(["git", "rebase", "-q", "main"], cwd=store.root, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert store.world.read() == {"a": "first", "m.feature": "rebased", "m.main": "upstream", "z": "last"}


def test_the_same_key_changed_differently_is_a_conflict_git_reports(store: MemoryStore) -> None:
    branch_setup(store)
    store.world.merge({"a": "feature says"})
    checkout(store, "-q", "main")
    store.world.merge({"a": "main says", "z": "changed on main only"})
    result = subprocess.run(["git", "merge", "-q", "--no-edit", "feature"], cwd=store.root, capture_output=True,
                            text=True)
    assert result.returncode != 0
    assert "world state keys changed on both sides" in result.stderr and "a" in result.stderr
    text = (store.root / "content" / "world_state.md").read_text()
    assert "<<<<<<< ours\nmain says\n=======\nfeature says\n>>>>>>> theirs" in text
    assert "changed on main only" in text
    checked = CliRunner().invoke(main, ["-C", str(store.root), "check"])
    assert checked.exit_code == 1 and "merge conflict marker" in checked.output
    # While the merge is unresolved nothing is written over it...
    with pytest.raises(RepositoryError, match="a merge is in progress: finish it with git merge --continue or --abort"):
        store.world.merge({"b": "no writes until it is resolved"})
    git(store.root, "add", "-A")
    # ...and markers committed by mistake block merges until resolved.
    git(store.root, "commit", "-qm", "commit the markers by mistake")
    with pytest.raises(FormatError, match="line .* holds a merge conflict marker"):
        store.world.merge({"b": "still no writes"})


def test_a_fresh_clone_gets_the_driver_when_a_store_opens(store: MemoryStore, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(store.root), str(clone))
    assert git(clone, "config", "--get", "merge.memsite-world.driver", check=False) == ""
    with MemoryStore(clone, agent="other"):
        pass
    driver = git(clone, "config", "--get", "merge.memsite-world.driver")
    assert "-m memsite merge-driver world %O %A %B %P" in driver
    assert "/content/world_state.md merge=memsite-world" in (clone / ".gitattributes").read_text()


def test_the_cli_shows_sets_and_unsets(store: MemoryStore) -> None:
    def run(*args: str, input: str | None = None):
        return CliRunner().invoke(main, ["-C", str(store.root), "--agent", "ops", "world", *args], input=input)

    assert run("set", "deploy.target", "staging").output.startswith("Set deploy.target (commit ")
    assert run("set", "notes", "-", input="line one\nline two\n").exit_code == 0
    assert run("show", "deploy.target").output == "staging\n"
    assert "notes:\n  line one\n  line two" in run("show").output
    assert run("unset", "deploy.target").output.startswith("Removed deploy.target")
    missing = run("show", "deploy.target")
    assert missing.exit_code == 1 and "no world key 'deploy.target'" in missing.output
    assert git(store.root, "log", "-1", "--format=%an").strip() == "ops"


def test_unset_names_only_the_keys_it_removed_and_show_says_when_the_world_is_empty(store: MemoryStore) -> None:
    from click.testing import CliRunner

    from memsite.cli import main

    def run(*args: str):
        return CliRunner().invoke(main, ["-C", str(store.root), "--agent", "planner", "world", *args])

    empty = run("show")
    assert empty.exit_code == 0 and empty.output == "No world state yet ('memsite world set KEY VALUE' adds a key).\n"
    store.world.merge({"owner": "ana"})
    result = run("unset", "owner", "nosuch")
    assert result.exit_code == 0 and result.output.startswith("Removed owner (commit ")
    assert result.output.rstrip().endswith("; no world key nosuch")
    assert git(store.root, "log", "-1", "--format=%s").strip() == "World: unset owner"
    before = head(store.root)
    again = run("unset", "nosuch")
    assert again.output == "Nothing removed: no world key nosuch; 'memsite world show' lists them\n"
    assert head(store.root) == before  # nothing committed
