"""A site build parses only the memory files that changed since the last (site/parsed.py), and trusts no cache
another user could have written."""

from __future__ import annotations

import os
import pickle
from datetime import UTC, datetime
from pathlib import Path

from memsite import MemoryStore
from memsite.foundation.config import load_config
from memsite.site.parsed import FOLDER
from memsite.site.snapshot import load

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def abstracts(repo: Path) -> dict[str, str]:
    snap = load(repo / "content", load_config(repo), NOW)
    assert snap.problems == []
    return {s.memory.id: s.memory.abstract for s in snap.memories}


def test_an_edited_added_or_removed_file_is_read_as_it_is_now(tmp_path: Path) -> None:
    repo = tmp_path / "memory"
    with MemoryStore.init(repo, agent="planner") as store:
        kept = store.remember("Staging uses the vega VPN", category="entities")
        edited = store.remember("The cache is flushed nightly", category="entities")
        gone = store.remember("Deploys go out on Tuesdays", category="events")
    first = abstracts(repo)
    assert list((repo / FOLDER).glob("*.pickle"))  # kept for the next build
    with MemoryStore(repo, agent="planner") as store:
        store.update(edited.id, abstract="The cache is flushed hourly")  # (the same size: only its times tell)
        store.forget(gone.id, reason="wrong")
        added = store.remember("Postgres locks the table during a migration", category="cases")
    second = abstracts(repo)
    assert second == {kept.id: first[kept.id], edited.id: "The cache is flushed hourly",
                      added.id: added.abstract}
    assert abstracts(repo) == second  # read from the cache this time: the same


def test_a_cache_someone_else_could_have_written_is_not_read(tmp_path: Path) -> None:
    """The cache is pickles (code runs when one is read): one writable by others is ignored, not trusted."""
    repo = tmp_path / "memory"
    with MemoryStore.init(repo, agent="planner") as store:
        memory = store.remember("Staging uses the vega VPN", category="entities")
    abstracts(repo)
    (cache,) = (repo / FOLDER).glob("*.pickle")
    kept = pickle.loads(cache.read_bytes())
    (name, (signature, values, digest)), = kept["memories"].items()
    values = tuple("Planted by someone else" if field == "abstract" else value
                   for field, value in zip(kept["fields"], values))
    planted = pickle.dumps({**kept, "memories": {name: (signature, values, digest)}})
    cache.write_bytes(planted)
    assert abstracts(repo)[memory.id] == "Planted by someone else"  # (so the cache is what is read)
    for path, mode in ((cache, 0o666), (cache.parent, 0o777)):
        cache.write_bytes(planted)
        os.chmod(path, mode)
        assert abstracts(repo)[memory.id] == "Staging uses the vega VPN", oct(mode)
        os.chmod(path, 0o600 if path == cache else 0o700)
