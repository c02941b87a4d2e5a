"""memsite.git.objects: ids, trees, tree edits, tree diffs and loose objects byte for byte as git makes and reads them.

(Trees git made parsed entry for entry, malformed trees, windowed diffs against a full parse:
tests/test_store.py.)
"""

from __future__ import annotations

import random
import subprocess
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsite.git.objects import (
    MODE_EXEC,
    MODE_FILE,
    MODE_GITLINK,
    MODE_LINK,
    MODE_TREE,
    Entry,
    Tree,
    blob_id,
    changed_window,
    loose_object,
    object_id,
)

from .conftest import init, run, text

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Names git takes in a tree: any bytes but NUL and '/', as memsite holds them (str, non-UTF-8 bytes as surrogate
# escapes); names that sort next to each other as a file and as a folder ('a' is ordered as 'a/').
NAME = (st.binary(min_size=1, max_size=10).filter(lambda raw: b"\x00" not in raw and b"/" not in raw)
        .map(lambda raw: raw.decode("utf-8", "surrogateescape"))
        | st.sampled_from(["a", "a.md", "a-b", "a0", "a/b".replace("/", "_"), "é", "100644 x", " ", "a b"]))
MODE = st.sampled_from([MODE_FILE, MODE_EXEC, MODE_TREE, MODE_LINK, MODE_GITLINK])
ID = st.binary(min_size=20, max_size=20)
ENTRIES = st.dictionaries(NAME, st.tuples(MODE, ID), min_size=1, max_size=30)


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    """A repository for git to make objects in (examples share it: its objects only add up)."""
    return init(tmp_path / "objects")


def mktree_id(repo: Path, entries: dict[str, tuple[int, bytes]]) -> str:
    """The id of the tree ``git mktree`` makes of ``entries`` (name -> (mode, id))."""
    kinds = {MODE_TREE: b"tree", MODE_GITLINK: b"commit"}
    listing = b"".join(b"%o %s %s\t%s\x00" % (mode, kinds.get(mode, b"blob"), sha.hex().encode(),
                                              name.encode("utf-8", "surrogateescape"))
                       for name, (mode, sha) in entries.items())
    return run(repo, "mktree", "-z", "--missing", input=listing).decode().strip()


def mktree(repo: Path, entries: dict[str, tuple[int, bytes]]) -> bytes:
    """The bytes of the tree ``git mktree`` makes of ``entries``."""
    return run(repo, "cat-file", "tree", mktree_id(repo, entries))


@FAST
@given(data=st.binary(max_size=300))
def test_ids_are_the_ids_git_gives(bare: Path, data: bytes) -> None:
    assert blob_id(data).hex() == run(bare, "hash-object", "--stdin", input=data).decode().strip()
    for kind in ("tree", "commit"):
        assert object_id(kind.encode(), data).hex() == \
            run(bare, "hash-object", "-t", kind, "--literally", "--stdin", input=data).decode().strip()


@FAST
@given(entries=ENTRIES)
def test_a_tree_memsite_builds_is_byte_for_byte_the_tree_git_mktree_makes(bare: Path,
                                                                         entries: dict[str, tuple[int, bytes]]) -> None:
    built = Tree.empty().edited({name: Entry(mode, sha) for name, (mode, sha) in entries.items()})
    data = mktree(bare, entries)
    assert built.serialize() == data
    assert object_id(b"tree", built.serialize()) == object_id(b"tree", data)
    assert len(built) == len(entries)
    assert all(built.get(name) == Entry(mode, sha) for name, (mode, sha) in entries.items())


@FAST
@given(entries=ENTRIES, edits=st.lists(st.tuples(NAME, st.none() | st.tuples(MODE, ID)), min_size=1, max_size=12))
def test_tree_edits_give_the_tree_git_makes_of_the_result(bare: Path, entries: dict[str, tuple[int, bytes]],
                                                         edits: list[tuple[str, tuple[int, bytes] | None]]) -> None:
    tree = Tree.parse(mktree(bare, entries))
    expected = dict(entries)
    for name, change in edits:  # one at a time: a file replaced by a folder of that name, removed, added back...
        tree = tree.edited({name: None if change is None else Entry(*change)})
        if change is None:
            expected.pop(name, None)
        else:
            expected[name] = change
    if not expected:
        assert tree.serialize() == b"" and len(tree) == 0
        return
    assert tree.serialize() == mktree(bare, expected)
    names = [name.encode("utf-8", "surrogateescape") for name, _ in tree.items()]
    assert names == run(bare, "ls-tree", "-z", "--name-only", mktree_id(bare, expected)).split(b"\x00")[:-1]


@pytest.mark.slow
@FAST
@given(entries=st.dictionaries(NAME, st.tuples(MODE, ID), min_size=40, max_size=120),
       edits=st.lists(st.tuples(NAME, st.none() | st.tuples(MODE, ID)), min_size=1, max_size=4))
def test_a_windowed_diff_of_two_trees_finds_what_git_diff_tree_finds(bare: Path, entries: dict[str, tuple[int, bytes]],
                                                                    edits: list[tuple[str, tuple[int, bytes] | None]]
                                                                    ) -> None:
    changed = dict(entries)
    for name, change in edits:
        if change is None:
            changed.pop(name, None)
        else:
            changed[name] = change
    if not changed:
        return
    old, new = mktree(bare, entries), mktree(bare, changed)
    window = changed_window(old, new)
    if window is None:  # (allowed: the caller then parses both trees whole)
        return
    before, after = window
    found = {(name, (before.get(name).mode, before.get(name).sha.hex()) if name in before else None,  # type: ignore[union-attr]
              (after.get(name).mode, after.get(name).sha.hex()) if name in after else None)  # type: ignore[union-attr]
             for name in before.keys() | after.keys()}
    old_id, new_id = object_id(b"tree", old).hex(), object_id(b"tree", new).hex()
    by_git = set()
    fields = run(bare, "diff-tree", "-z", "--no-renames", old_id, new_id).split(b"\x00")
    for info, path in zip(fields[0:-1:2], fields[1::2]):  # ':<old mode> <new mode> <old id> <new id> <status>', path
        old_mode, new_mode, a, b, status = info[1:].decode().split()
        by_git.add((path.decode("utf-8", "surrogateescape"), None if status == "A" else (int(old_mode, 8), a),
                    None if status == "D" else (int(new_mode, 8), b)))
    # git reports a file turned folder as a deletion and an addition; memsite keys entries by name.
    assert {(n, a, b) for n, a, b in found} == merge_by_name(by_git)


def merge_by_name(changes: set[tuple[str, object, object]]) -> set[tuple[str, object, object]]:
    merged: dict[str, list[object]] = {}
    for name, a, b in changes:
        slot = merged.setdefault(name, [None, None])
        slot[0] = slot[0] or a
        slot[1] = slot[1] or b
    return {(name, a, b) for name, (a, b) in merged.items()}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(st.binary(max_size=2000),  # and larger than one stored zlib block (64 KB), half repeated
                     st.tuples(st.integers(35_000, 70_000), st.integers(0, 1 << 32))
                     .map(lambda size_seed: random.Random(size_seed[1]).randbytes(size_seed[0]) * 2)),
       level=st.integers(0, 9))
def test_loose_objects_git_wrote_at_any_level_read_back(bare: Path, data: bytes, level: int) -> None:
    sha = run(bare, "-c", f"core.looseCompression={level}", "hash-object", "-w", "--stdin", input=data).decode().strip()
    raw = (bare / ".git" / "objects" / sha[:2] / sha[2:]).read_bytes()
    assert loose_object(raw) == ("blob", data)
    damaged = raw[:-3] + bytes([raw[-3] ^ 0xFF]) + raw[-2:]  # (its checksum): zlib's error, never wrong bytes
    with pytest.raises(zlib.error):
        loose_object(damaged)


def test_a_tree_git_wrote_loose_reads_back(bare: Path) -> None:
    (bare / "a").mkdir()
    (bare / "a" / "b.md").write_text("b\n")
    subprocess.run(["git", "add", "a"], cwd=bare, check=True)
    sha = text(bare, "write-tree").strip()
    kind, data = loose_object((bare / ".git" / "objects" / sha[:2] / sha[2:]).read_bytes())
    assert kind == "tree" and [(name, entry.is_tree) for name, entry in Tree.parse(data).items()] == [("a", True)]
