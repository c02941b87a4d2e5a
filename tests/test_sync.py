"""Many clones sharing one memory through a bare remote: sync, merge drivers, proposals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsite import MemoryStore
from memsite.api import storage_of
from memsite.cli import main
from memsite.features.sync import integrate, sync
from memsite.foundation.record import short_id
from tests.conftest import Clock, assert_clean, git

pytestmark = pytest.mark.slow  # clones sharing a remote, site builds

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def remote(tmp_path: Path, store: MemoryStore) -> Path:
    """A bare remote holding the store's repository; the store's clone has it as origin."""
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(store.root, "remote", "add", "origin", str(bare))
    sync(storage_of(store))
    return bare


def clone(remote: Path, where: Path, agent: str, clock: Clock | None = None) -> MemoryStore:
    git(remote.parent, "clone", "-q", str(remote), str(where))
    return MemoryStore(where, agent=agent, clock=clock)


def on_remote(remote: Path) -> list[str]:
    """The memory files on the remote's main branch."""
    names = git(remote, "ls-tree", "-r", "--name-only", "main", "content/memories").split()
    return sorted(names)


def test_a_fresh_clone_registers_the_merge_drivers_when_opened(remote: Path, tmp_path: Path) -> None:
    git(remote.parent, "clone", "-q", str(remote), str(tmp_path / "b"))
    assert git(tmp_path / "b", "config", "--get-regexp", r"^merge\.", check=False) == ""
    with MemoryStore(tmp_path / "b", agent="coder"):
        pass
    assert "memsite merge-driver" in git(tmp_path / "b", "config", "--get-regexp", r"^merge\.")


def test_memories_written_in_two_clones_end_up_on_the_remote_once(store: MemoryStore, remote: Path,
                                                                  tmp_path: Path) -> None:
    other = clone(remote, tmp_path / "b", "coder")
    mine = store.remember("The build server is orion", category="entities")
    theirs = other.remember("Deploys happen on Tuesdays", category="events")
    first = sync(storage_of(store))
    assert first.pushed >= 1
    second = sync(storage_of(other))
    assert (second.fetched, second.pushed) >= (1, 1)
    sync(storage_of(store))
    files = on_remote(remote)
    assert len(files) == 2 and any(mine.id[-6:].lower() in f for f in files)
    assert {m.id for m in store.list()} == {m.id for m in other.list()} == {mine.id, theirs.id}
    for commit in (mine.commit, theirs.commit):  # nothing acknowledged was dropped or rewritten
        assert subprocess.run(["git", "merge-base", "--is-ancestor", commit, "main"], cwd=remote).returncode == 0
    assert_clean(store.root)
    assert_clean(other.root)
    other.close()


def test_world_state_merges_by_key_and_a_key_set_two_ways_keeps_the_value_written_last(
        store: MemoryStore, remote: Path, tmp_path: Path, clock: Clock) -> None:
    other = clone(remote, tmp_path / "b", "coder", clock)
    store.world.merge({"deploy.target": "staging"})
    other.world.merge({"db.version": "16"})
    sync(storage_of(store))
    sync(storage_of(other))
    sync(storage_of(store))
    assert store.world.read() == other.world.read() == {"deploy.target": "staging", "db.version": "16"}

    other.world.merge({"ci.status": "red", "release": "1.4"})
    clock.advance(seconds=30)
    store.world.merge({"ci.status": "green", "release": "1.5"})  # written last
    sync(storage_of(store))
    assert sync(storage_of(other)).status == "integrated"  # no sync is wedged by a key set two ways
    sync(storage_of(store))
    assert store.world.read() == other.world.read() == {"deploy.target": "staging", "db.version": "16",
                                                        "ci.status": "green", "release": "1.5"}
    message = git(other.root, "log", "-1", "--format=%B", "--merges")
    assert ("World-Conflict: ci.status: kept 'green' (planner, 2026-11-01T09:00:30Z) over 'red' "
            "(coder, 2026-11-01T09:00:00Z)") in message
    assert git(other.root, "status", "--porcelain") == ""
    clock.advance(seconds=30)  # the same moment on both sides: the agent name that sorts last is kept
    other.world.merge({"owner": "coder"})
    store.world.merge({"owner": "planner"})
    sync(storage_of(other))
    sync(storage_of(store))
    sync(storage_of(other))
    assert store.world.read()["owner"] == other.world.read()["owner"] == "planner"
    checked = CliRunner().invoke(main, ["-C", str(other.root), "check"])
    assert checked.exit_code == 0, checked.output
    assert "warning: world key ci.status was set two ways" in checked.output
    assert "warning: world key owner was set two ways" in checked.output
    built = CliRunner().invoke(main, ["-C", str(other.root), "build"])
    assert built.exit_code == 0, built.output
    week = (other.root / "site" / "weeks" / "2026-W44" / "index.html").read_text()
    assert "Set two ways" in week and "ci.status was set two ways: kept &#x27;green&#x27; (planner" in week
    other.close()


def test_memories_a_sync_brings_name_the_commit_that_last_changed_them(store: MemoryStore, remote: Path,
                                                                    tmp_path: Path) -> None:
    other = clone(remote, tmp_path / "b", "coder")
    written = [other.remember(f"Service {n} listens on port {9000 + n}", category="entities") for n in range(3)]
    other.forget(written[1].id, reason="retired")
    updated = other.update(written[2].id, content="Service 2 listens on port 9102 since the move")
    store.remember("The build server is orion", category="entities")
    sync(storage_of(other))
    sync(storage_of(store))  # a merge of four commits from the other clone
    for memory in (written[0], updated):
        path = store.get(memory.id).path.relative_to(store.root).as_posix()
        assert store.get(memory.id).commit == git(store.root, "log", "-1", "--format=%H", "--", path).strip()


def test_recall_counts_from_two_clones_add_up(store: MemoryStore, remote: Path, tmp_path: Path,
                                             clock: Clock) -> None:
    shared = store.remember("The staging cluster is vega", category="entities")
    sync(storage_of(store))
    other = clone(remote, tmp_path / "b", "coder", clock)
    for _ in range(2):
        store.recall("staging cluster vega")
    for _ in range(3):
        other.recall("staging cluster vega")
    store.flush_activity()
    other.flush_activity()
    sync(storage_of(store))
    sync(storage_of(other))
    sync(storage_of(store))
    assert store.get(shared.id).active_count == other.get(shared.id).active_count == 5
    other.close()


def test_clones_writing_and_syncing_concurrently_lose_nothing(store: MemoryStore, remote: Path,
                                                             tmp_path: Path) -> None:
    agents = ("alpha", "beta", "gamma")
    for agent in agents:
        git(remote.parent, "clone", "-q", str(remote), str(tmp_path / agent))
    procs = [subprocess.Popen([sys.executable, "-m", "tests.sync_process", str(tmp_path / agent), agent, "9"],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for agent in agents]
    acked = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        acked += [line.split()[1] for line in out.splitlines() if line.startswith("ACK ")]
    assert len(acked) == 27
    integrate(storage_of(store))  # a sync that lost the race to main left its commits queued on its agent branch
    sync(storage_of(store))
    ids = [m.id for m in store.list()]
    assert sorted(ids) == sorted(acked)  # every memory, exactly once
    assert len(on_remote(remote)) == 27
    world = store.world.read()
    assert {world[f"agent.{a}.progress"] for a in agents} == {"9"}
    assert_clean(store.root)


def test_an_agent_proposes_its_branch_with_the_change_report(store: MemoryStore, remote: Path,
                                                              tmp_path: Path) -> None:
    git(remote.parent, "clone", "-q", str(remote), str(tmp_path / "b"))
    with MemoryStore(tmp_path / "b", agent="coder", agent_branch=True) as coder:
        main = git(coder.root, "rev-parse", "main").strip()
        m = coder.remember("Flaky tests were fixed by pinning the browser", category="cases")
        # The agent's branch is written by its ref: the person's checkout stays on main, untouched.
        assert git(coder.root, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
        assert git(coder.root, "rev-parse", "main").strip() == main
        assert git(coder.root, "rev-parse", "review/coder").strip() == m.commit
        assert not m.path.exists()
        assert_clean(coder.root)
        from memsite.features.sync import propose

        branch, body = propose(storage_of(coder))
    assert branch == "review/coder"
    assert short_id(m.id) in body and "## Created (1)" in body
    assert git(remote, "rev-parse", "review/coder").strip() == m.commit
    assert on_remote(remote) == []  # main is untouched until the pull request is merged
    from memsite.features.sync import integrate

    # the merge queue leaves it to the review
    assert integrate(storage_of(store)).commit is None and on_remote(remote) == []


def test_propose_with_nothing_to_propose_pushes_nothing(store: MemoryStore, remote: Path, tmp_path: Path) -> None:
    git(remote.parent, "clone", "-q", str(remote), str(tmp_path / "b"))
    result = CliRunner().invoke(main, ["-C", str(tmp_path / "b"), "--agent", "coder", "propose"])
    assert result.exit_code == 1 and result.output == (
        "Error: nothing to propose: review/coder has no commit that origin/main lacks; nothing was pushed "
        "(write with MemoryStore(path, agent='coder', agent_branch=True) first)\n")
    assert git(remote, "branch", "--list", "review/*") == ""
