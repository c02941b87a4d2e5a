"""MemoryStore against real git repositories: what a writer and a reviewer see."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import time
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsite import InvalidInput, Memory, MemoryStore, MemsiteError, NotFound, RepositoryError
from memsite.api import storage_of
from memsite.foundation.fileformat import parse_memory
from memsite.git import index as gitindex
from memsite.storage import catalog as catalog_module
from memsite.storage import catalog_rows
from memsite.storage.transaction import AHEAD_BATCH

from .conftest import Clock, assert_clean, git, head

LARGE = 2 * AHEAD_BATCH + AHEAD_BATCH // 2  # a large transaction: files written ahead in batches, and some not


def trailers(repo: Path, commit: str = "HEAD") -> list[tuple[str, str]]:
    out = git(repo, "log", "-1", "--format=%(trailers:only,unfold)", commit)
    return [tuple(line.split(": ", 1)) for line in out.splitlines() if ": " in line]  # type: ignore[misc]


def test_remember_commits_one_file_authored_by_the_agent(store: MemoryStore) -> None:
    before = head(store.root)
    memory = store.remember("User prefers tabs over spaces in Python files.\n\nSeen in three sessions.",
                            category="preferences", tags=["python", "style"], source="2026-11-20_debug_indent")
    assert memory.commit == head(store.root)
    assert git(store.root, "rev-parse", f"{memory.commit}^").strip() == before
    assert memory.path is not None and memory.path.exists()
    # In the folder of the month it was created.
    assert memory.path.parent == store.root / "content" / "memories" / "preferences" / "2026-11" / "001"
    assert git(store.root, "show", "--name-only", "--format=", memory.commit).split() == [
        memory.path.relative_to(store.root).as_posix()
    ]
    author = git(store.root, "log", "-1", "--format=%an <%ae>|%cn").strip()
    assert author == "planner <planner@memsite.invalid>|planner"
    subject = git(store.root, "log", "-1", "--format=%s").strip()
    assert subject == "Remember preferences: User prefers tabs over spaces in Python files."
    assert trailers(store.root) == [("Memory-Id", memory.id), ("Category", "preferences"), ("Action", "created")]
    assert_clean(store.root)


def test_the_stored_file_carries_every_field(store: MemoryStore, clock: Clock) -> None:
    memory = store.remember("Deploys go through make release.", category="patterns", tags=["release"],
                            abstract="Release through make", overview="Never push tags by hand.", pinned=True)
    on_disk = parse_memory(memory.path.read_text(), "m.md", category="patterns")  # type: ignore[union-attr]
    assert on_disk == memory
    assert (on_disk.agent, on_disk.created, on_disk.updated) == ("planner", clock.now, clock.now)
    assert ((on_disk.abstract, on_disk.overview, on_disk.pinned)
            == ("Release through make", "Never push tags by hand.", True))
    assert store.get(memory.id) == memory
    assert store.get(memory.id).commit == memory.commit


def test_abstract_and_overview_default_to_the_text(store: MemoryStore) -> None:
    memory = store.remember("# Cache keys\n\nKeys include the schema version, so a migration invalidates them.")
    assert memory.abstract == "Cache keys"
    assert memory.overview == "Keys include the schema version, so a migration invalidates them."


def test_update_keeps_the_id_and_changes_only_what_was_given(store: MemoryStore, clock: Clock) -> None:
    memory = store.remember("The CI runner has 2 cores.", category="entities", tags=["ci"])
    clock.advance(days=1)
    updated = store.update(memory.id, content="The CI runner has 4 cores.", tags=["ci", "hardware"])
    assert updated.id == memory.id and updated.path == memory.path
    assert updated.content == "The CI runner has 4 cores."
    assert updated.tags == ("ci", "hardware")
    assert updated.abstract == memory.abstract and updated.created == memory.created
    assert updated.updated == clock.now
    assert updated.commit == head(store.root) != memory.commit
    assert ("Action", "updated") in trailers(store.root)
    assert git(store.root, "diff", "--numstat", f"{memory.commit}..{updated.commit}").split()[:2] == ["3", "3"]
    assert_clean(store.root)


def test_an_update_that_changes_nothing_makes_no_commit(store: MemoryStore) -> None:
    memory = store.remember("Stable fact.", tags=["a"])
    same = store.update(memory.id, tags=["a"], content="Stable fact.")
    assert head(store.root) == memory.commit
    assert same.commit == memory.commit


def test_changing_the_category_moves_the_file_and_keeps_the_id(store: MemoryStore, clock: Clock) -> None:
    memory = store.remember("Timeouts in the deploy job", category="general")
    clock.advance(days=40)  # updated in December: the file stays in the month it was created
    moved = store.update(memory.id, category="error_solution")
    assert moved.id == memory.id and moved.category == "cases"
    assert moved.path == store.root / "content/memories/cases/2026-11/001" / memory.path.name  # type: ignore[union-attr]
    assert moved.path.exists()
    assert not memory.path.exists()  # type: ignore[union-attr]
    assert [m.id for m in store.list(category="cases")] == [memory.id]
    assert_clean(store.root)


def test_forget_deletes_the_file_and_history_keeps_it(store: MemoryStore) -> None:
    memory = store.remember("Old server address is 10.0.0.5", category="entities")
    commit = store.forget(memory.id, reason="server decommissioned")
    assert commit == head(store.root)
    assert not memory.path.exists()  # type: ignore[union-attr]
    with pytest.raises(NotFound):
        store.get(memory.id)
    assert ("Action", "forgotten") in trailers(store.root)
    assert ("Reason", "server decommissioned") in trailers(store.root)
    rel = memory.path.relative_to(store.root).as_posix()  # type: ignore[union-attr]
    assert "10.0.0.5" in git(store.root, "show", f"{commit}^:{rel}")
    assert_clean(store.root)


def test_unknown_ids_are_a_clear_error(store: MemoryStore) -> None:
    with pytest.raises(NotFound, match="no memory with id 'nope00'"):
        store.get("nope00")
    with pytest.raises(InvalidInput, match="id 'nope' is too short"):  # (an id has 6 characters or more)
        store.get("nope")
    with pytest.raises(NotFound):
        store.update("01JD3X4K9Q2W8E5R7T6Y1V3A0P", content="x")
    with pytest.raises(NotFound):
        store.forget("01JD3X4K9Q2W8E5R7T6Y1V3A0P")


def test_list_filters_by_category_alias_and_agent(store: MemoryStore) -> None:
    a = store.remember("one", category="preferences")
    b = store.remember("two", category="cases")
    other = MemoryStore(store.root, agent="reviewer")
    c = other.remember("three", category="user_pref")
    other.close()
    assert [m.id for m in store.list()] == [a.id, b.id, c.id]
    assert [m.id for m in store.list(category="user_pref")] == [a.id, c.id]
    assert [m.id for m in store.list(agent="reviewer")] == [c.id]
    assert store.list(category="cases", agent="reviewer") == []


def test_a_transaction_is_one_commit(store: MemoryStore) -> None:
    keep = store.remember("to be updated")
    drop = store.remember("to be forgotten")
    before = head(store.root)
    with store.transaction("Import notes from session 12") as tx:
        created = [tx.remember(f"note {i}", category="events") for i in range(5)]
        tx.update(keep.id, content="updated inside")
        tx.forget(drop.id, reason="merged")
        assert tx.get(created[0].id).content == "note 0"
    assert tx.commit == head(store.root)
    assert git(store.root, "rev-list", "--count", f"{before}..HEAD").strip() == "1"
    assert git(store.root, "log", "-1", "--format=%s").strip() == "Import notes from session 12"
    actions = [value for key, value in trailers(store.root) if key == "Action"]
    assert sorted(actions) == ["created"] * 5 + ["forgotten", "updated"]
    assert store.get(keep.id).content == "updated inside"
    assert len(store.list(category="events")) == 5
    assert_clean(store.root)


def test_a_transaction_that_raises_writes_nothing(store: MemoryStore) -> None:
    before = head(store.root)
    with pytest.raises(RuntimeError):
        with store.transaction("half done") as tx:
            tx.remember("never committed")
            raise RuntimeError("agent crashed")
    assert head(store.root) == before
    assert store.list() == []
    assert_clean(store.root)
    assert store.remember("after").commit  # the lock was released


def test_writing_through_the_store_inside_a_transaction_is_refused(store: MemoryStore) -> None:
    with store.transaction() as tx:
        tx.remember("inside")
        with pytest.raises(MemsiteError, match="transaction is already open"):
            with store.transaction():
                pass
    with pytest.raises(MemsiteError, match="closed"):
        tx.remember("after the block")


def test_uncommitted_edits_to_a_memory_file_are_never_overwritten(store: MemoryStore) -> None:
    memory = store.remember("original text")
    assert memory.path is not None
    memory.path.write_text(memory.path.read_text().replace("original text", "hand edit"))
    with pytest.raises(InvalidInput, match="changes that are not committed"):
        store.update(memory.id, content="agent edit")
    assert "hand edit" in memory.path.read_text()
    assert head(store.root) == memory.commit



def test_a_persons_untracked_file_where_a_write_creates_one_is_never_overwritten(store: MemoryStore) -> None:
    from memsite.git.repo import Author

    rel = "content/notes/planner/agent_knowledge.md"  # where the planner's first task writes its notes
    (store.root / rel).parent.mkdir(parents=True, exist_ok=True)
    (store.root / rel).write_text("my own notes, not committed\n")
    before = head(store.root)
    repo = storage_of(store).repo
    with repo.locked(), pytest.raises(InvalidInput, match=f"{rel}: has changes that are not committed"):
        repo.commit("refs/heads/main", before, {rel: b"memsite's notes\n", "content/notes/planner/other.md": b"x\n"},
                    message="Notes", author=Author("planner", "planner@memsite"), when=0)
    assert (store.root / rel).read_text() == "my own notes, not committed\n"
    assert head(store.root) == before

def test_the_catalog_follows_commits_made_with_plain_git(store: MemoryStore) -> None:
    memory = store.remember("typo in this memroy")
    assert memory.path is not None
    memory.path.write_text(memory.path.read_text().replace("memroy", "memory"))
    git(store.root, "commit", "-qam", "Fix a typo by hand")
    assert store.get(memory.id).content == "typo in this memory"
    assert store.get(memory.id).commit == head(store.root)
    git(store.root, "rm", "-q", memory.path.relative_to(store.root).as_posix())
    git(store.root, "commit", "-qm", "Remove by hand")
    assert store.list() == []


def test_the_catalog_follows_plain_git_edits_in_a_large_folder(store: MemoryStore) -> None:
    # Past 16 KB a folder's changes are found from the bytes around them, not a full parse.
    with store.transaction("many") as tx:
        made = [tx.remember(f"event number {i} happened on host{i}", category="events") for i in range(400)]
    first, middle, last = (made[i] for i in (0, 200, 399))
    for memory in (first, last):
        assert memory.path is not None
        memory.path.write_text(memory.path.read_text().replace("happened", "was seen"))
    assert middle.path is not None
    git(store.root, "rm", "-q", middle.path.relative_to(store.root).as_posix())
    git(store.root, "commit", "-qam", "Edit two, remove one, by hand")
    assert store.get(first.id).content.startswith("event number 0 was seen")
    assert store.get(last.id).content.startswith("event number 399 was seen")
    assert len(store.list(category="events")) == 399
    assert store.get(made[100].id).content == made[100].content


_MODE = st.sampled_from([b"100644", b"100755", b"40000"])
_NAME = st.binary(min_size=1, max_size=12).filter(lambda n: b"\x00" not in n and b"/" not in n) | st.sampled_from(
    [b"100644 x", b"a100644 b", b"40000 ", b"a", b"100644 "])
# Ids are SHA-1 output (a byte of one is NUL one time in 256); names may look like anything.
_ID = st.binary(max_size=8).map(lambda data: hashlib.sha1(data).digest())


_FOLDER = st.dictionaries(_NAME, st.tuples(_MODE, _ID), min_size=1, max_size=60)
_EDITS = st.lists(st.tuples(st.integers(0, 59), st.sampled_from(["drop", "change", "add"]), _NAME, _ID),
                  min_size=1, max_size=5)


def _folder_versions(entries: dict[bytes, tuple[bytes, bytes]], edits: list[tuple[int, str, bytes, bytes]]
                     ) -> tuple[bytes, bytes]:
    """A serialized tree of ``entries`` (name -> (mode, id)) and the same tree with ``edits`` applied."""
    def serialize(items: dict[bytes, tuple[bytes, bytes]]) -> bytes:
        key = lambda name: name + b"/" if items[name][0] == b"40000" else name  # noqa: E731 - git's order
        return b"".join(b"%s %s\x00%s" % (items[n][0], n, items[n][1]) for n in sorted(items, key=key))

    changed = dict(entries)
    names = sorted(changed)
    for index, action, name, sha in edits:
        target = names[index % len(names)]
        if action == "drop":
            changed.pop(target, None)
        elif action == "change":
            changed[target] = (changed.get(target, (b"100644", sha))[0], sha)
        else:
            changed[name] = (b"100644", sha)
    return serialize(entries), serialize(changed)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(entries=_FOLDER, edits=_EDITS)
def test_a_windowed_tree_diff_finds_exactly_what_a_full_parse_finds(entries, edits) -> None:  # type: ignore[no-untyped-def]
    from memsite.git.objects import Tree, changed_window

    old, new = _folder_versions(entries, edits)
    if old == new:
        return
    assert changed_window(old, new) == Tree.parse(old).difference(Tree.parse(new))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(entries=_FOLDER, edits=_EDITS)
def test_a_folder_parsed_from_its_last_version_is_the_folder_parsed_whole(entries, edits) -> None:  # type: ignore[no-untyped-def]
    from memsite.git.objects import Tree

    old, new = _folder_versions(entries, edits)
    whole = Tree.parse(new)
    again = Tree.parse(old).reparsed(new)
    assert again is not None and (again.serialize(), list(again.items())) == (whole.serialize(), list(whole.items()))


def test_a_large_folder_others_added_to_is_parsed_around_their_files_only() -> None:
    from memsite.git.objects import Tree

    def folder(names: list[str], edited: str = "") -> bytes:
        def sha(name: str) -> bytes:  # (the edited one's id differs in its last byte only)
            digest = hashlib.sha1(name.encode()).digest()
            return digest[:-1] + bytes([digest[-1] ^ 1]) if name == edited else digest

        return b"".join(b"100644 %s\x00%s" % (n.encode(), sha(n)) for n in sorted(names))

    names = [f"memory-{i * 7919 % 1000:03d}-{i}.md" for i in range(500)]
    parsed = Tree.parse(folder(names))
    for later, edited in [(names + ["memory-500-a.md", "memory-000-b.md", "memory-999-c.md"], ""),
                          (names + ["a.md"], ""), (names + ["z.md"], ""), (names[1:], ""), (names[:-1], ""),
                          (names[:200] + names[201:], ""), ([], ""), (names, names[300]), (names, names[0])]:
        data = folder(later, edited)
        again = parsed.reparsed(data)
        assert again is not None and again.serialize() == data and len(again) == len(later)
        assert all(again.get(name) is not None for name in later)
    middle = sorted(names)[250].encode()
    swapped = folder(names).replace(middle, b"~" + middle[1:])  # out of git's order: made by hand
    again = parsed.reparsed(swapped)
    assert again is None or list(again.items()) == list(Tree.parse(swapped).items())


_TREE_NAMES = st.text(st.characters(blacklist_characters="\x00/", blacklist_categories=("Cs",)), min_size=1,
                      max_size=24).filter(lambda name: name not in (".", ".."))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.dictionaries(_TREE_NAMES, st.tuples(st.sampled_from(["100644", "100755", "40000", "120000"]),
                                                      st.binary(min_size=20, max_size=20)), min_size=1, max_size=40))
def test_a_tree_git_wrote_reads_back_entry_for_entry(tmp_path: Path, entries: dict[str, tuple[str, bytes]]) -> None:
    from memsite.git.objects import MODE_TREE, Tree

    repo = tmp_path / "trees"
    if not repo.exists():
        git(tmp_path, "init", "-q", str(repo))
    listing = b"".join(b"%s %s %s\t%s\x00" % (mode.encode(), b"tree" if mode == "40000" else b"blob",
                                              sha.hex().encode(), name.encode("utf-8", "surrogateescape"))
                       for name, (mode, sha) in entries.items())
    made = subprocess.run(["git", "mktree", "-z", "--missing"], cwd=repo, input=listing, capture_output=True,
                          check=True)
    data = subprocess.run(["git", "cat-file", "tree", made.stdout.decode().strip()], cwd=repo, capture_output=True,
                          check=True).stdout
    tree = Tree.parse(data)
    assert tree.serialize() == data
    assert {name: (entry.mode, entry.sha) for name, entry in tree.items()} == {
        name: (int(mode, 8), sha) for name, (mode, sha) in entries.items()}
    assert all(tree.get(name).is_tree == (entry.mode == MODE_TREE) for name, entry in tree.items())
    with pytest.raises(RepositoryError, match="truncated"):
        Tree.parse(data[:-1])


@pytest.mark.parametrize("data", [b"0 " * 100_000, b"0" * 200_000 + b"\x00" * 21, b"100644 " + b"a" * 300_000,
                                  b"100644 a.md\x00" + b"\x01" * 20 + b"100644 b.md\x00" + b"\x02" * 19])
def test_a_malformed_tree_is_refused(data: bytes) -> None:
    from memsite.git.objects import Tree

    with pytest.raises(RepositoryError, match="truncated"):
        Tree.parse(data)


def test_a_process_that_found_no_catalog_keeps_the_one_another_made_meanwhile(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Two processes open a new checkout at once: the second looked before the first made the catalog."""
    Catalog = catalog_module.Catalog
    first = Catalog(tmp_path / "catalog.sqlite3", tmp_path, tmp_path / "activity.sqlite3")
    first.db.execute("INSERT INTO meta VALUES ('commit', 'abc123')")  # and went on to use it
    looked, read = [], Catalog._meta_or_none

    def stale_first_look(self: catalog_module.Catalog, key: str) -> str | None:
        if key == "schema" and not looked:
            looked.append(key)
            return None
        return read(self, key)

    monkeypatch.setattr(Catalog, "_meta_or_none", stale_first_look)
    second = Catalog(tmp_path / "catalog.sqlite3", tmp_path, tmp_path / "activity.sqlite3")
    assert looked and second.commit == "abc123" and first.commit == "abc123"
    first.close()
    second.close()


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=70_000) | st.integers(0, 200_000).map(lambda n: b"tree entry " * (n // 11)),
       level=st.sampled_from([0, 1, 6]), chunks=st.integers(1, 3))
def test_reading_a_loose_object_gives_what_zlib_gives(data: bytes, level: int, chunks: int) -> None:
    import zlib

    from memsite.git.objects import loose_object

    # git deflates the header and the body in separate calls: streams of several stored runs.
    packer = zlib.compressobj(level)
    header = b"blob %d\x00" % len(data)
    step = len(data) // chunks + 1
    stream = packer.compress(header) + b"".join(
        packer.compress(data[i : i + step]) for i in range(0, len(data), step)) + packer.flush()
    assert loose_object(stream) == ("blob", data)
    damaged = bytearray(stream)
    damaged[len(stream) // 2] ^= 0x10
    with pytest.raises(zlib.error):
        assert loose_object(bytes(damaged)) == ("blob", data)  # whatever zlib makes of damage, never silent


def test_shared_index_files_git_no_longer_reads_expire_after_an_hour(store: MemoryStore,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gitindex, "MAX_DELTA_ENTRIES", 5)  # a fold of the split index every few writes
    git_dir = store.root / ".git"
    for n in range(14):
        store.remember(f"Fact {n} about the build", category="entities")
    old = set(git_dir.glob("sharedindex.*"))
    assert len(old) >= 2
    for path in old:  # left from a busy hour two hours ago
        os.utime(path, (time.time() - 7200, time.time() - 7200))
    for n in range(14, 28):
        store.remember(f"Fact {n} about the build", category="entities")
    kept = set(git_dir.glob("sharedindex.*"))
    assert len(kept & old) <= 1  # (the one the index was based on then: every write since has touched it)
    assert git(store.root, "status", "--porcelain") == ""  # the index git reads is whole
    assert len(store.list()) == 28


def test_a_clone_stores_loose_objects_uncompressed_unless_the_user_chose(tmp_path: Path) -> None:
    # Reading back a whole category folder after a hand commit then costs a copy, not an inflate.
    default = MemoryStore.init(tmp_path / "default", agent="planner")
    assert git(default.root, "config", "core.looseCompression").strip() == "0"
    home_config = Path.home() / ".gitconfig"
    home_config.write_text("[core]\n\tcompression = 9\n")
    chosen = MemoryStore.init(tmp_path / "chosen", agent="planner")
    assert subprocess.run(["git", "config", "--local", "core.looseCompression"], cwd=chosen.root).returncode == 1
    default.close()
    chosen.close()
    assert_clean(default.root)


def test_a_second_clone_sees_memories_after_a_pull(store: MemoryStore, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(store.root), str(clone))
    with MemoryStore(clone, agent="other") as theirs:
        assert theirs.list() == []
        mine = store.remember("learned after the clone")
        git(clone, "pull", "-q", "--no-rebase", "origin", "main")
        assert [m.id for m in theirs.list()] == [mine.id]


def test_the_catalog_is_rebuilt_when_deleted(store: MemoryStore) -> None:
    ids = [store.remember(f"memory {i}", category=c).id for i, c in enumerate(["cases", "events", "general"])]
    store.close()
    shutil.rmtree(store.root / ".memsite")
    with MemoryStore(store.root, agent="planner") as reopened:
        assert [m.id for m in reopened.list()] == ids
        assert all(m.commit for m in reopened.list())


def test_a_malformed_file_committed_by_hand_is_skipped_and_named(store: MemoryStore) -> None:
    memory = store.remember("fine")
    assert memory.path is not None
    memory.path.write_text(memory.path.read_text().replace("active_count: 0", "active_count: many"))
    git(store.root, "commit", "-qam", "break it")
    assert store.list() == []
    with pytest.raises(MemsiteError, match=r"content/memories/general/.*\.md cannot be read: field 'active_count'"):
        store.get(memory.id)


def test_opening_something_that_is_not_a_memory_repository(tmp_path: Path) -> None:
    with pytest.raises(RepositoryError, match="not a git repository"):
        MemoryStore(tmp_path)
    git(tmp_path, "init", "-q")
    with pytest.raises(MemsiteError, match="memsite init"):
        MemoryStore(tmp_path)


def test_init_refuses_an_existing_memory_repository(store: MemoryStore) -> None:
    with pytest.raises(MemsiteError, match="already a memsite repository"):
        MemoryStore.init(store.root)


def test_init_inside_an_existing_git_repository_keeps_its_history(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "trunk")
    (tmp_path / "README.md").write_text("project\n")
    (tmp_path / ".gitignore").write_text("*.log\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "start")
    with MemoryStore.init(tmp_path, agent="planner") as store:
        store.remember("first memory")
    assert git(tmp_path, "rev-list", "--count", "HEAD").strip() == "3"
    assert (tmp_path / ".gitignore").read_text() .startswith("*.log\n")
    assert ".memsite/" in (tmp_path / ".gitignore").read_text()
    assert_clean(tmp_path)


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(alphabet="abcdefgh/", min_size=1, max_size=8), min_size=1, max_size=4))
def test_init_creates_missing_folders_on_demand(tmp_path: Path, parts: list[str]) -> None:
    target = tmp_path.joinpath(*[p.replace("/", "_") for p in parts], "memory")
    if target.exists():
        shutil.rmtree(target)
    with MemoryStore.init(target, agent="planner") as store:
        memory = store.remember("x", category="patterns")
    assert target.is_dir() and memory.path is not None and memory.path.is_file()


def test_memories_round_trip_through_the_store(store: MemoryStore) -> None:
    texts = ["plain", "ünïcödé and emoji 🚀", "line one\nline two\n\n- item", "yes", "2026-11-20", "0777", "key: value"]
    ids = [store.remember(text, tags=["t"]).id for text in texts]
    for mid, text in zip(ids, texts):
        assert store.get(mid).content == text
    assert_clean(store.root)


def test_the_index_stays_exact_without_split_index(store: MemoryStore) -> None:
    git(store.root, "config", "core.splitIndex", "false")
    git(store.root, "update-index", "--no-split-index")
    memory = store.remember("written through git update-index")
    store.update(memory.id, content="updated")
    assert_clean(store.root)


def test_a_file_a_person_marked_skip_worktree_stays_so_across_writes_and_folds(store: MemoryStore) -> None:
    notes = store.root / "notes.txt"
    notes.write_text("local settings\n")
    git(store.root, "add", "notes.txt")
    git(store.root, "commit", "-qm", "notes")
    git(store.root, "update-index", "--skip-worktree", "notes.txt")  # an entry with extended flags: index v3
    git(store.root, "update-index", "--split-index")  # now in the shared base too
    for i in range(3):
        store.remember(f"a memory written beside a skip-worktree file {i}")
    assert git(store.root, "ls-files", "-v", "notes.txt").strip() == "S notes.txt"
    assert_clean(store.root)


def test_git_commands_between_writes_keep_the_index_exact(store: MemoryStore) -> None:
    def human_commit() -> None:
        notes = store.root / "notes.txt"
        notes.write_text(notes.read_text() + "x" if notes.exists() else "x")
        git(store.root, "add", "notes.txt")
        git(store.root, "commit", "-qm", "human commit")

    operations = [
        lambda: store.remember("a new memory"),
        human_commit,
        lambda: git(store.root, "update-index", "--split-index"),
        lambda: git(store.root, "gc", "-q"),
        lambda: store.update(store.list()[0].id, content="changed"),
        lambda: git(store.root, "update-index", "--no-split-index"),
        lambda: store.remember("another"),
        lambda: git(store.root, "status", "--porcelain"),
        lambda: store.forget(store.list()[-1].id),
    ]
    for operation in operations * 3:
        operation()
        assert_clean(store.root)


def test_a_large_transaction_is_written_as_a_pack(store: MemoryStore) -> None:
    with store.transaction("bulk import") as tx:
        for i in range(300):
            tx.remember(f"imported memory number {i}", category="events")
    packs = list((store.root / ".git" / "objects" / "pack").glob("*.pack"))
    assert packs
    assert len(store.list(category="events")) == 300
    assert_clean(store.root)
    assert subprocess.run(["git", "verify-pack", str(packs[0])], capture_output=True).returncode == 0


def test_a_large_transaction_writes_its_files_ahead_and_the_working_tree_ends_as_committed(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memsite.git import worktree

    placed: list[bool] = []
    place = worktree.FilesAhead.place

    def counting(self: worktree.FilesAhead, path: str, target: str, data: bytes) -> bool:
        placed.append(place(self, path, target, data))
        return placed[-1]

    monkeypatch.setattr(worktree.FilesAhead, "place", counting)
    with store.transaction("bulk import") as tx:
        first = tx.remember("the first imported memory, about the build server", category="events")
        made = [tx.remember(f"imported memory number {i} about topic {i * 7}", category="events")
                for i in range(LARGE)]
        changed = tx.update(first.id, content="the first imported memory, about the build server, now retired")
        tx.forget(made[5].id, reason="a mistake")
    staged = len(made) + 1
    sent = staged // AHEAD_BATCH * AHEAD_BATCH  # whole batches are written ahead; the rest by the commit
    assert placed.count(True) == sent - 2  # renamed into place: all sent but the changed one and the forgotten one
    assert placed.count(False) == 1 + staged - sent  # the changed memory (its final bytes, not those written ahead)
    assert store.get(first.id).content == changed.content
    rel = Path(changed.path).relative_to(store.root)  # type: ignore[arg-type]
    committed = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=store.root, capture_output=True, check=True).stdout
    assert Path(changed.path).read_bytes() == committed  # type: ignore[arg-type]
    assert not Path(made[5].path).exists()  # type: ignore[arg-type]
    assert len(store.list(category="events")) == LARGE
    assert_clean(store.root)
    assert not list((store.root / ".memsite" / "ahead").iterdir())


def test_files_the_helper_could_not_write_ahead_are_written_by_the_commit(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memsite.git import worktree

    placed: list[bool] = []
    place = worktree.FilesAhead.place
    monkeypatch.setattr(worktree.FilesAhead, "place",
                        lambda self, *args: placed.append(place(self, *args)) or placed[-1])
    ahead = store.root / ".memsite" / "ahead"
    with store.transaction("bulk import") as tx:
        ahead.mkdir(parents=True, exist_ok=True)  # (after the write's sweep of the folder)
        for n in (0, 7):  # names the helper will be given, taken: it cannot write those two
            (ahead / f".{n}.{os.getpid()}.memsite-tmp").write_text("in the way")
        made = [tx.remember(f"imported memory number {i} about topic {i * 7}", category="events")
                for i in range(AHEAD_BATCH + AHEAD_BATCH // 2)]
    sent = AHEAD_BATCH  # a whole batch is sent ahead; the half batch after it is written by the commit
    assert placed.count(True) == sent - 2 and placed.count(False) == len(made) - sent + 2  # two refused
    assert [path.read_text() for path in sorted(ahead.iterdir())] == ["in the way"] * 2  # not memsite's to remove
    for memory in made:
        rel = Path(memory.path).relative_to(store.root)  # type: ignore[arg-type]
        assert Path(memory.path).read_bytes() == git(store.root, "show", f"HEAD:{rel}").encode()  # type: ignore[arg-type]
    assert_clean(store.root)


def test_without_a_helper_process_a_large_transaction_writes_its_files_itself(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memsite.git import worktree

    monkeypatch.setattr(worktree.sys, "executable", str(store.root / "no-such-python"))
    with store.transaction("bulk import") as tx:
        made = [tx.remember(f"imported memory number {i}", category="events") for i in range(LARGE)]
    assert all(Path(m.path).exists() for m in made)  # type: ignore[arg-type]
    assert len(store.list()) == LARGE
    assert_clean(store.root)


def test_a_large_transaction_that_raises_leaves_no_file_behind(store: MemoryStore) -> None:
    head_before = head(store.root)
    with pytest.raises(RuntimeError), store.transaction("bulk import") as tx:
        for i in range(LARGE):
            tx.remember(f"imported memory number {i}", category="events")
        raise RuntimeError("the import failed half way")
    assert head(store.root) == head_before
    assert not (store.root / "content" / "memories" / "events").exists()
    assert not list((store.root / ".memsite" / "ahead").iterdir())
    assert_clean(store.root)


def test_ctrl_c_while_a_failed_large_transaction_drops_its_files_leaves_the_store_usable(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch, ctrl_c: None
) -> None:
    import _thread
    import threading
    import time

    unlink = os.unlink
    slowed: list[str] = []

    def slow_disk(path: Any, *args: Any, **kwargs: Any) -> None:
        if f"{os.sep}ahead{os.sep}" in os.fspath(path) and not slowed:
            slowed.append(os.fspath(path))
            time.sleep(0.5)
        unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", slow_disk)
    with pytest.raises(KeyboardInterrupt), store.transaction("bulk import") as tx:
        for i in range(LARGE):
            tx.remember(f"imported memory number {i}", category="events")
        threading.Timer(0.1, _thread.interrupt_main).start()  # a second Ctrl-C, while the files are dropped
        raise RuntimeError("the import failed half way")
    monkeypatch.undo()
    assert slowed  # the Ctrl-C came while the files written ahead were removed
    store.remember("written after the interrupted import")  # same thread: the transaction and its lock are gone
    assert not list((store.root / ".memsite" / "ahead").iterdir())
    assert len(store.list()) == 1
    assert_clean(store.root)


def test_something_in_the_files_ahead_folder_that_cannot_be_removed_never_fails_a_write(store: MemoryStore) -> None:
    (store.root / ".memsite" / "ahead" / "a folder someone made").mkdir(parents=True)
    memory = store.remember("written beside a folder in .memsite/ahead")
    assert Path(memory.path).exists()  # type: ignore[arg-type]
    assert_clean(store.root)


def test_the_names_of_a_shared_index_are_read_as_git_lists_them(store: MemoryStore) -> None:
    from memsite.git import index as gitindex

    for name in ("a-first.txt", "b.txt", "c" * 200 + ".txt"):
        (store.root / name).write_text(name)
    git(store.root, "add", ".")
    git(store.root, "commit", "-qm", "files")
    git(store.root, "update-index", "--skip-worktree", "a-first.txt")  # extended flags before other entries
    git(store.root, "update-index", "--split-index")
    link = gitindex._link(gitindex._read(store.root / ".git" / "index")[2])
    assert link is not None
    shared = store.root / ".git" / f"sharedindex.{link.hex()}"
    listed = git(store.root, "ls-files", "-z").split("\0")[:-1]
    assert gitindex._names(shared.read_bytes()) == [name.encode() for name in listed]


def test_a_journal_record_torn_before_it_was_cut_to_length_is_ignored(store: MemoryStore) -> None:
    kept = store.remember("the release train leaves on thursdays")
    journal = storage_of(store).repo.state_dir / "journal.json"
    new = b'{"ref": "refs/heads/main", "paths": ["content/memories/general/x.md"]}'
    old_tail = b"".join(b', "content/memories/general/old-%d.md"' % i for i in range(20)) + b"]}"
    journal.write_bytes(new + old_tail)  # a kill between writing the record and cutting the old one's tail
    assert storage_of(store).repo.journal.pending() == []
    store.remember("the deploy freeze starts on fridays")
    assert Path(kept.path).exists()  # type: ignore[arg-type]
    assert json.loads(journal.read_bytes())["done"] == "refs/heads/main"  # cut to the new record's length
    assert_clean(store.root)


def test_memory_objects_compare_by_content_not_location() -> None:
    from datetime import datetime

    when = datetime(2026, 1, 1, tzinfo=UTC)
    a = Memory(id="01JD3X4K9Q2W8E5R7T6Y1V3A0P", category="general", abstract="a", content="a", agent="x",
               created=when, updated=when)
    assert a == a.replace(path=Path("/elsewhere"), commit="abc")


def test_git_gets_to_pack_objects_now_and_then(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from memsite.git import repo as repo_module

    packs = store.root / ".git" / "objects" / "pack"
    before = len(list(packs.glob("*.pack")))
    for batch in range(2):  # two large transactions: two packs
        with store.transaction(f"batch {batch}") as tx:
            for i in range(70):
                tx.remember(f"batch {batch} memory {i}")
    assert len(list(packs.glob("*.pack"))) == before + 2
    git(store.root, "config", "gc.autoPackLimit", "1")  # git's threshold, made small
    git(store.root, "config", "gc.autoDetach", "false")  # so the test sees it finish
    monkeypatch.setattr(repo_module, "GC_SAMPLE", "")  # sample every commit
    store.remember("this write lets git tidy up")
    assert len(list(packs.glob("*.pack"))) == 1
    counts = dict(line.split(": ") for line in git(store.root, "count-objects", "-v").splitlines())
    assert counts["count"] == "0"
    assert_clean(store.root)
    assert len(store.list()) == 141


def test_opening_a_store_leaves_a_correct_git_config_alone(store: MemoryStore) -> None:
    """Regression: every open rewrote the config (GitPython reads 'true' as True), so opens collided."""
    config = store.root / ".git" / "config"
    before = (config.read_bytes(), config.stat().st_mtime_ns)
    for _ in range(3):
        MemoryStore(store.root, agent="another").close()
    assert (config.read_bytes(), config.stat().st_mtime_ns) == before


def test_the_catalog_records_a_commit_only_once_the_branch_points_at_it(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The catalog's rows are written beside the commit, on a thread: a commit git refuses leaves none,
    and a catalog that fails after the branch moved leaves the commit standing, found again from git."""
    kept = store.remember("Kept from before", category="events")
    refs = storage_of(store).repo.refs
    update = refs.update

    def refused(*args: object, **kwargs: object) -> None:
        raise RepositoryError("refs/heads/main.lock is held by another git process")

    monkeypatch.setattr(refs, "update", refused)
    with pytest.raises(RepositoryError, match="held by another git process"):
        store.remember("Never committed", category="events")
    monkeypatch.setattr(refs, "update", update)
    assert [m.abstract for m in store.list(category="events")] == ["Kept from before"]
    assert storage_of(store).catalog.commit == head(store.root)

    def broken(*args: object, **kwargs: object) -> object:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(catalog_rows, "insert_rows", broken)
    memory = store.remember("Committed while the catalog failed", category="events")
    monkeypatch.undo()
    assert memory.commit == head(store.root) and "recording it in the catalog failed" in caplog.text
    assert store.get(memory.id).commit == memory.commit  # caught up from git
    assert [m.id for m in store.list(category="events")] == [kept.id, memory.id]
    assert_clean(store.root)


def test_a_catalog_record_an_interrupt_left_unsettled_never_wedges_the_store(store: MemoryStore) -> None:
    """A Ctrl-C between starting the catalog's record of a commit and settling it leaves its thread holding a
    transaction on the connection reads use; the next write (or closing) drops it instead of waiting forever."""
    storage_of(store).catalog.record([], [], [])  # started, never settled
    memory = store.remember("Written after an interrupted one", category="events")
    assert store.get(memory.id).commit == head(store.root)
    storage_of(store).catalog.record([], [], [])
    store.close()  # returns: the record is dropped, the catalog's thread ends
    with MemoryStore(store.root, agent="checker") as again:
        assert [m.abstract for m in again.list(category="events")] == ["Written after an interrupted one"]
