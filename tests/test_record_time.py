"""Record time from the table of versions: what the memories held at each commit of the branch, as a catalog
of that commit alone holds them; built once, extended as the branch grows, rebuilt when lost or when the
history under it was rewritten."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest

from memsite import MemoryStore
from memsite.storage.catalog import Catalog
from memsite.storage.versions import Versions

from .conftest import Clock, git

FIELDS = ("id", "abstract", "content", "category", "valid_until", "superseded_by", "supersedes", "active_count")


def held(catalog: Catalog) -> dict[str, tuple[object, ...]]:
    return {m.id: tuple(getattr(m, f) for f in FIELDS) for m in catalog.list()}


def first_parents(root: Path) -> list[str]:
    return git(root, "rev-list", "--first-parent", "--reverse", "HEAD").split()


def history(store: MemoryStore, clock: Clock) -> None:
    """Memories written, changed, superseded, forgotten, and a branch merged, a day apart."""
    a = store.remember("The canary runs ten minutes before a full rollout.", category="events")
    clock.advance(days=1)
    b = store.remember("The user's manager is Tomas Novak.", category="profile")
    clock.advance(days=1)
    store.update(a.id, content="The canary runs twenty minutes before a full rollout.")
    clock.advance(days=1)
    store.remember("The user's manager is now Ana Silva.", category="profile", supersedes=b.id)
    clock.advance(days=1)
    c = store.remember("Refunds are paid back within five days.", category="cases", tags=["refunds"])
    root = store.root
    git(root, "checkout", "-q", "-b", "side")
    (root / "content" / "memories" / "cases").mkdir(parents=True, exist_ok=True)
    with MemoryStore(root, agent="reviewer", clock=clock, branch="side") as side:
        side.remember("Refunds above 500 EUR need a second approval.", category="cases")
    git(root, "checkout", "-q", "main")
    git(root, "merge", "-q", "--no-ff", "-m", "Merge side", "side")
    clock.advance(days=1)
    store.forget(c.id)
    clock.advance(days=1)
    store.remember("Deploys stop on Friday afternoons.", category="events")


def test_every_commit_reads_as_a_catalog_of_that_commit_alone(tmp_path: Path, store: MemoryStore,
                                                            clock: Clock) -> None:
    history(store, clock)
    inner = store._store
    commits = first_parents(store.root)
    assert len(commits) >= 8
    alone = Catalog(tmp_path / "alone.sqlite3", store.root, inner.activity.path)
    try:
        for commit in commits[::-1] + commits:  # backwards, then forwards: each a look-up in the same table
            alone.sync(inner.repo, inner.config, commit)
            assert inner.at_commit(commit, held) == held(alone), commit
            assert inner.at_commit(commit, lambda past: past.count()) == alone.count()
            for word in ("canary", "manager", "refunds"):
                found = inner.at_commit(commit, lambda past, w=word: sorted(past.ids(past.lexical(w)).values()))
                assert found == sorted(alone.ids(alone.lexical(word)).values()), (commit, word)
    finally:
        alone.close()


def test_recall_in_record_time_finds_what_was_believed_then(store: MemoryStore, clock: Clock) -> None:
    start = clock.now
    history(store, clock)
    then = (start + timedelta(days=1, hours=1)).isoformat()
    assert [h.memory.content for h in store.recall("canary rollout", as_of=then, record_time=True)] == \
        ["The canary runs ten minutes before a full rollout."]
    assert [h.memory.content for h in store.recall("canary rollout")] == \
        ["The canary runs twenty minutes before a full rollout."]
    later = (start + timedelta(days=4, hours=1)).isoformat()
    assert [h.memory.abstract for h in store.recall("refunds", as_of=later, record_time=True)] == \
        ["Refunds are paid back within five days."]
    assert [h.memory.abstract for h in store.recall("refunds", as_of=later, record_time=True, tags=["refunds"])] == \
        ["Refunds are paid back within five days."]
    assert store.recall("refunds", tags=["refunds"]) == []  # forgotten since


def test_the_table_is_extended_as_the_branch_grows_and_rebuilt_when_lost_or_rewritten(
        store: MemoryStore, clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    history(store, clock)
    inner = store._store
    root = store.root
    tip = first_parents(root)[-1]
    assert inner.at_commit(tip, held) == held(inner.catalog)
    clock.advance(days=1)
    store.remember("A memory written after the table was built.", category="events")
    assert inner.at_commit(first_parents(root)[-1], held) == held(inner.catalog)  # extended
    numbered = inner.past.db.execute("SELECT count(*) FROM commits").fetchone()[0]
    assert numbered == len(first_parents(root))

    # The branch rewritten under the table (as a purge rewrites it): the commits after the cut are new ones.
    git(root, "reset", "-q", "--hard", first_parents(root)[3])
    store.close()
    with MemoryStore(root, agent="planner", clock=clock) as again:
        clock.advance(days=1)
        again.remember("Written on the rewritten branch.", category="events")
        inner = again._store
        assert inner.at_commit(first_parents(root)[-1], held) == held(inner.catalog)
        assert inner.past.db.execute("SELECT count(*) FROM commits").fetchone()[0] == len(first_parents(root))

    # Damaged: set aside with a warning, and built again.
    past = root / ".memsite" / "past.sqlite3"
    with open(past, "r+b") as handle:
        handle.seek(0)
        handle.write(os.urandom(4096))
    with MemoryStore(root, agent="planner", clock=clock) as again:
        inner = again._store
        assert inner.at_commit(first_parents(root)[-1], held) == held(inner.catalog)
    assert any("past.sqlite3" in r.getMessage() for r in caplog.records)


def test_a_version_table_of_another_format_is_built_anew(tmp_path: Path, store: MemoryStore, clock: Clock) -> None:
    history(store, clock)
    inner = store._store
    tip = first_parents(store.root)[-1]
    assert inner.at_commit(tip, held) == held(inner.catalog)
    inner.past.db.execute("UPDATE meta SET value = 'versions-0' WHERE key = 'schema'")
    store.close()
    with MemoryStore(store.root, agent="planner", clock=clock) as again:
        assert again._store.at_commit(tip, held) == held(again._store.catalog)
        assert again._store.past.db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0] == \
            Versions.schema_version
