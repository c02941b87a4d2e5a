"""A team sharing one remote: agent branches, the merge queue, and the faults a team meets."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from memsite import ConfigError, ConflictError, MemoryStore, RepositoryError
from memsite.api import storage_of
from memsite.cli import main
from memsite.features.sync import integrate, sync
from memsite.foundation.config import parse_config
from tests.conftest import Clock, assert_clean, git, head
from tests.faults import fill

pytestmark = pytest.mark.slow  # clones sharing a remote, many syncs and processes

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def remote(tmp_path: Path, store: MemoryStore) -> Path:
    """A bare remote holding the store's repository (agent 'planner'); the store's clone has it as origin."""
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(store.root, "remote", "add", "origin", str(bare))
    sync(storage_of(store))
    return bare


def clone(remote: Path, name: str, **options: object) -> MemoryStore:
    where = remote.parent / name
    git(remote.parent, "clone", "-q", str(remote), str(where))
    git(where, "config", "gc.autoDetach", "false")
    return MemoryStore(where, agent=name, **options)  # type: ignore[arg-type]


def tip(remote: Path, branch: str) -> str | None:
    result = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], cwd=remote,
                            capture_output=True, text=True)
    return result.stdout.strip() or None


def on_main(remote: Path, commit: str, branch: str = "main") -> bool:
    return subprocess.run(["git", "merge-base", "--is-ancestor", commit, branch], cwd=remote).returncode == 0


def protect_main(remote: Path, hook: str = "update") -> Path:
    """Refuse pushes to main (as a protected branch does) until the returned file exists.

    ``update`` refuses that ref alone, as GitHub does; ``pre-receive`` refuses the whole push.
    """
    allow = remote / "allow-main"
    check = (f'[ "$ref" = refs/heads/main ] && [ ! -e "{allow}" ] && '
             '{ echo "main is protected: CI integrates"; exit 1; }')
    body = (f'ref="$1"\n{check}\nexit 0\n' if hook == "update"
            else f'while read old new ref; do {check}; done\nexit 0\n')
    path = remote / "hooks" / hook
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return allow


def test_sync_publishes_the_agents_branch_and_integrates_into_main(store: MemoryStore, remote: Path) -> None:
    memory = store.remember("The build server is orion", category="entities")
    result = sync(storage_of(store))
    assert (result.status, result.published, result.pushed) == ("integrated", "agent/planner", 1)
    assert tip(remote, "main") == tip(remote, "agent/planner") == head(store.root)
    assert on_main(remote, memory.commit)
    again = sync(storage_of(store))
    assert (again.status, again.pushed) == ("up to date", 0)


@pytest.mark.parametrize("hook", ["update", "pre-receive"])
def test_a_protected_main_leaves_commits_queued_until_integrate(store: MemoryStore, remote: Path, hook: str) -> None:
    allow = protect_main(remote, hook)
    memory = store.remember("Deploys happen on Tuesdays", category="events")
    before = tip(remote, "main")
    result = sync(storage_of(store))
    assert result.status == "queued" and "main is protected: CI integrates" in result.note
    assert tip(remote, "agent/planner") == memory.commit and tip(remote, "main") == before
    allow.touch()  # the integrator (a CI job) may push main
    with clone(remote, "integrator") as queue:
        merged = integrate(storage_of(queue))
        assert merged.merged == ("agent/planner",) and merged.left_out == ()
        assert on_main(remote, memory.commit)
        assert integrate(storage_of(queue)).commit is None  # nothing is merged twice
    assert_clean(remote.parent / "integrator")


def test_while_the_merge_queue_runs_syncs_leave_main_to_it(store: MemoryStore, remote: Path, clock: Clock) -> None:
    """Agents pushing main would keep moving it under the queue's pushes: while the queue's merge is main's
    newest commit (under two minutes old), a sync publishes only; once it is older, syncs push main again."""
    allow = protect_main(remote)
    store.remember("The release train leaves on Thursdays", category="events")
    assert sync(storage_of(store)).status == "queued"
    allow.touch()
    with clone(remote, "integrator", clock=clock) as queue:
        assert integrate(storage_of(queue)).merged == ("agent/planner",)
    merged = tip(remote, "main")
    assert git(remote, "log", "-1", "--format=%s", "main").strip() == "Integrate agent branches: agent/planner"
    second = store.remember("Hotfixes skip the train", category="events")
    result = sync(storage_of(store))
    assert (result.status, result.note) == ("queued", "the merge queue is running")
    assert tip(remote, "main") == merged and on_main(remote, second.commit, "agent/planner")
    clock.advance(seconds=121)  # nothing merged for two minutes: as far as a sync can tell, the queue stopped
    assert sync(storage_of(store)).status == "integrated" and on_main(remote, second.commit)


@pytest.mark.parametrize("mode", ["push", "queue"])
def test_sync_integrate_pushes_main_always_or_never(store: MemoryStore, remote: Path, clock: Clock,
                                                    mode: str) -> None:
    path = store.root / "mkdocs.yml"
    data = yaml.safe_load(path.read_text())
    data["plugins"]["memsite"]["sync"] = {"integrate": mode}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    git(store.root, "commit", "-qam", f"sync.integrate: {mode}")
    allow = protect_main(remote)
    store.remember("The release train leaves on Thursdays", category="events")
    assert sync(storage_of(store)).status == "queued"
    allow.touch()
    with clone(remote, "integrator", clock=clock) as queue:
        assert integrate(storage_of(queue)).commit == tip(remote, "main")  # the queue's merge is main's newest commit
        with MemoryStore(store.root, agent="planner", clock=clock) as configured:
            memory = configured.remember("Hotfixes skip the train", category="events")
            result = sync(storage_of(configured))
    expected = ("integrated", "") if mode == "push" else ("queued", "sync.integrate: queue")
    assert (result.status, result.note) == expected
    assert on_main(remote, memory.commit) == (mode == "push")
    with pytest.raises(ConfigError, match="plugins.memsite.sync.integrate': expected auto or push or queue"):
        parse_config({"sync": {"integrate": "sometimes"}})


def test_a_main_that_keeps_moving_leaves_the_sync_queued_not_failed(store: MemoryStore, remote: Path) -> None:
    """Each push of the store's clone finds main moved since its fetch: another clone pushed first."""
    other = remote.parent / "person"
    git(remote.parent, "clone", "-q", str(remote), str(other))
    hook = store.root / ".git" / "hooks" / "pre-push"
    hook.write_text(f"""#!/bin/sh
unset GIT_DIR GIT_INDEX_FILE GIT_WORK_TREE
cd "{other}" && git fetch -q origin && git reset -q --hard origin/main && date +%s%N > moved.txt \\
  && git add moved.txt && git -c user.name=p -c user.email=p@e commit -qm moved && git push -q origin HEAD:main
""")
    hook.chmod(0o755)
    memory = store.remember("The staging cluster is vega", category="entities")
    result = sync(storage_of(store), attempts=2)
    assert (result.status, result.attempts) == ("queued", 2) and "kept moving" in result.note
    assert tip(remote, "agent/planner") is not None and not on_main(remote, memory.commit)
    hook.unlink()
    assert sync(storage_of(store)).status == "integrated" and on_main(remote, memory.commit)
    assert (store.root / "moved.txt").exists()  # what the other clone pushed was merged in
    assert_clean(store.root)


def test_with_no_merge_queue_a_sync_that_lost_the_race_tries_again_until_it_integrates(
        store: MemoryStore, remote: Path) -> None:
    """A plain bare remote and nobody running 'memsite integrate': a sync that left its commits queued would
    leave them off main for good, so it fetches, merges and pushes again (with backoff) until main takes them."""
    other = remote.parent / "person"
    git(remote.parent, "clone", "-q", str(remote), str(other))
    hook = store.root / ".git" / "hooks" / "pre-push"
    hook.write_text(f"""#!/bin/sh
unset GIT_DIR GIT_INDEX_FILE GIT_WORK_TREE
[ "$(cat "{other}/moves" 2>/dev/null)" = 3 ] && exit 0
cd "{other}" && git fetch -q origin && git reset -q --hard origin/main \\
  && echo $(( $(cat moves 2>/dev/null || echo 0) + 1 )) > moves \\
  && git add moves && git -c user.name=p -c user.email=p@e commit -qm moved && git push -q origin HEAD:main
""")
    hook.chmod(0o755)
    memory = store.remember("The staging cluster is vega", category="entities")
    result = sync(storage_of(store))
    assert (result.status, result.attempts) == ("integrated", 4)
    assert on_main(remote, memory.commit) and (store.root / "moves").read_text() == "3\n"
    assert_clean(store.root)


def test_beside_a_running_merge_queue_a_sync_that_lost_the_race_is_queued_at_once(
        store: MemoryStore, remote: Path, clock: Clock) -> None:
    """The queue's merge is on main but others pushed after it: the queue runs all the same, and fifty clones
    trying main again and again would keep its pushes losing; a sync that lost the race leaves it queued."""
    allow = protect_main(remote)
    store.remember("The release train leaves on Thursdays", category="events")
    assert sync(storage_of(store)).status == "queued"
    allow.touch()
    with clone(remote, "integrator", clock=clock) as queue:
        assert integrate(storage_of(queue)).merged == ("agent/planner",)
    other = remote.parent / "person"
    git(remote.parent, "clone", "-q", str(remote), str(other))
    move = (f'cd "{other}" && git fetch -q origin && git reset -q --hard origin/main && date +%s%N > moved.txt '
            "&& git add moved.txt && git -c user.name=p -c user.email=p@e commit -qm moved "
            "&& git push -q origin HEAD:main")
    subprocess.run(["sh", "-c", move], check=True)  # main's newest commit is no longer the queue's merge
    hook = store.root / ".git" / "hooks" / "pre-push"
    hook.write_text(f"#!/bin/sh\nunset GIT_DIR GIT_INDEX_FILE GIT_WORK_TREE\n{move}\n")
    hook.chmod(0o755)
    store.remember("Hotfixes skip the train", category="events")
    result = sync(storage_of(store))
    assert (result.status, result.attempts) == ("queued", 1) and "kept moving" in result.note


def test_remember_goes_on_while_a_sync_waits_for_the_network(store: MemoryStore, remote: Path) -> None:
    started, release = remote / "push-started", remote / "release"
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(f'#!/bin/sh\ntouch "{started}"\nfor i in $(seq 200); do [ -e "{release}" ] && exit 0; '
                    'sleep 0.1; done\nexit 0\n')
    hook.chmod(0o755)
    store.remember("Written before the sync", category="events")
    results = []
    syncing = threading.Thread(target=lambda: results.append(sync(storage_of(store))))
    syncing.start()
    while not started.exists():
        time.sleep(0.01)
    during = store.remember("Written while the sync pushes", category="events")  # does not wait for the push
    assert syncing.is_alive() and not release.exists()
    release.touch()
    syncing.join()
    assert results[0].status == "integrated"
    assert sync(storage_of(store)).status == "integrated" and on_main(remote, during.commit)
    assert_clean(store.root)


def test_integrate_merges_in_one_commit_and_leaves_out_a_conflict(store: MemoryStore, remote: Path,
                                                                   clock: Clock) -> None:
    shared = store.remember("The payments service owns refunds", category="entities")
    sync(storage_of(store))
    allow = protect_main(remote)
    base = tip(remote, "main")
    alpha, beta, gamma = (clone(remote, name, clock=clock) for name in ("alpha", "beta", "gamma"))
    alpha.world.merge({"ci.status": "green"})
    alpha.update(shared.id, content="The payments service owns refunds and chargebacks")
    beta.update(shared.id, content="The billing service owns refunds")  # the same line, changed two ways
    clock.advance(seconds=5)
    made = gamma.remember("The ledger service owns invoices", category="entities")
    gamma.world.merge({"ci.status": "red"})  # set last: kept
    for agent in (alpha, beta, gamma):
        assert sync(storage_of(agent)).status == "queued"
    allow.touch()
    result = CliRunner().invoke(main, ["-C", str(store.root), "integrate", "--json"])
    assert result.exit_code == 1  # a branch was left out: someone has to look
    report = json.loads(result.stdout)
    assert report["merged"] == ["agent/alpha", "agent/gamma"]
    assert [name for name, _ in report["left_out"]] == ["agent/beta"]
    assert "both sides changed the same lines of the memory text" in report["left_out"][0][1]
    assert "Left out agent/beta: " in result.stderr
    parents = git(remote, "rev-list", "--parents", "-n", "1", "main").split()[1:]
    assert parents == [base, tip(remote, "agent/alpha"), tip(remote, "agent/gamma")]  # one commit for the run
    assert on_main(remote, made.commit) and not on_main(remote, tip(remote, "agent/beta") or "")
    assert "## ci.status\n\nred\n" in git(remote, "show", "main:content/world_state.md")
    assert "World-Conflict: ci.status: kept 'red' (gamma, " in git(remote, "log", "-1", "--format=%B", "main")
    with pytest.raises(ConflictError, match=r"content/memories/.*published on agent/beta"):
        sync(storage_of(beta))
    assert beta.get(shared.id).content == "The billing service owns refunds"  # nothing merged
    for agent in (alpha, beta, gamma):
        agent.close()


def test_two_integrators_at_once_merge_each_branch_once(store: MemoryStore, remote: Path) -> None:
    allow = protect_main(remote)
    agents = [clone(remote, f"agent{i}") for i in range(4)]
    for agent in agents:
        agent.remember(f"{agent.agent} knows the port of service {agent.agent}", category="entities")
        assert sync(storage_of(agent)).status == "queued"
        agent.close()
    allow.touch()
    runners = []
    for name in ("ci-1", "ci-2"):
        git(remote.parent, "clone", "-q", str(remote), str(remote.parent / name))
        runners.append(subprocess.Popen([sys.executable, "-m", "memsite", "-C", str(remote.parent / name), "--agent",
                                         name, "integrate", "--json"], stdout=subprocess.PIPE, text=True, cwd=ROOT))
    outputs = [json.loads(proc.communicate(timeout=120)[0]) for proc in runners]
    assert [proc.returncode for proc in runners] == [0, 0]
    merged = sorted(name for out in outputs for name in out["merged"])
    assert merged == [f"agent/agent{i}" for i in range(4)]  # each by one of them, none twice
    merges = git(remote, "rev-list", "--min-parents=2", "--parents", "main").splitlines()
    tips = [tip(remote, f"agent/agent{i}") for i in range(4)]
    assert all(sum(t in line.split()[1:] for line in merges) == 1 for t in tips)


def test_a_rewound_main_is_noticed_and_what_it_lost_published_again(store: MemoryStore, remote: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    start = tip(remote, "main")
    first = store.remember("Release 1.4 shipped on Monday", category="events")
    second = store.remember("Release 1.5 is planned for June", category="events")
    sync(storage_of(store))
    person = remote.parent / "person"
    git(remote.parent, "clone", "-q", str(remote), str(person))
    git(person, "push", "-q", "--force", "origin", f"{start}:refs/heads/main")  # a person rewinds main
    with caplog.at_level(logging.WARNING, logger="memsite"):
        result = sync(storage_of(store))
    assert result.status == "integrated" and result.restored == 2
    assert [r.message for r in caplog.records if "rewound" in r.message] == [
        "origin/main was rewound (a force-push?): 2 commit(s) this clone had seen there are gone; publishing them "
        "again (forget a memory instead of rewinding the branch)"]
    assert on_main(remote, first.commit) and on_main(remote, second.commit)
    cli = CliRunner().invoke(main, ["-C", str(store.root), "sync"])
    assert cli.exit_code == 0 and cli.output.startswith("Up to date with origin/main")


def test_a_deleted_agent_branch_and_a_hand_commit_on_main(store: MemoryStore, remote: Path) -> None:
    allow = protect_main(remote)
    memory = store.remember("The cache is flushed nightly", category="patterns")
    assert sync(storage_of(store)).status == "queued"
    git(store.root, "push", "-q", "origin", ":refs/heads/agent/planner")  # someone deleted the agent branch
    allow.touch()
    person = remote.parent / "person"
    git(remote.parent, "clone", "-q", str(remote), str(person))
    (person / "NOTES.txt").write_text("a person's note\n")
    git(person, "add", "NOTES.txt")
    git(person, "-c", "user.name=p", "-c", "user.email=p@e", "commit", "-qm", "A person's note")
    git(person, "push", "-q", "origin", "main")
    with clone(remote, "integrator") as queue:
        assert integrate(storage_of(queue)).commit is None  # nothing published: nothing to merge
        allow.unlink()
        assert sync(storage_of(store)).status == "queued"  # the branch is published again
        allow.touch()
        assert integrate(storage_of(queue)).merged == ("agent/planner",)
    assert on_main(remote, memory.commit) and on_main(remote, head(person))
    assert git(remote, "show", "main:NOTES.txt") == "a person's note\n"


def test_an_unreachable_remote_is_one_line_and_loses_nothing(store: MemoryStore, remote: Path) -> None:
    memory = store.remember("Backups run at 02:00", category="patterns")
    git(store.root, "remote", "set-url", "origin", str(remote.parent / "gone.git"))
    result = CliRunner().invoke(main, ["-C", str(store.root), "sync"])
    assert result.exit_code == 1 and result.output.startswith("Error: cannot reach the remote origin (")
    assert result.output.count("\n") == 1
    git(store.root, "remote", "set-url", "origin", str(remote))
    assert sync(storage_of(store)).status == "integrated" and on_main(remote, memory.commit)


def test_a_hook_refusing_a_push_is_named(store: MemoryStore, remote: Path) -> None:
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'pushes are frozen for the release'\nexit 1\n")
    hook.chmod(0o755)
    memory = store.remember("The release freeze starts Friday", category="events")
    with pytest.raises(RepositoryError, match="refused agent/planner: pre-receive hook declined: pushes are frozen"):
        sync(storage_of(store))
    hook.unlink()
    assert sync(storage_of(store)).status == "integrated" and on_main(remote, memory.commit)


def test_a_merge_bringing_an_executable_keeps_its_mode(store: MemoryStore, remote: Path) -> None:
    person = remote.parent / "person"
    git(remote.parent, "clone", "-q", str(remote), str(person))
    script = person / "tools" / "deploy.sh"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\necho deploy\n")
    script.chmod(0o755)
    git(person, "add", "tools")
    git(person, "-c", "user.name=p", "-c", "user.email=p@e", "commit", "-qm", "A deploy script")
    git(person, "push", "-q", "origin", "main")
    store.remember("Deploys go through tools/deploy.sh", category="patterns")
    assert sync(storage_of(store)).status == "integrated"
    assert os.access(store.root / "tools" / "deploy.sh", os.X_OK)
    assert_clean(store.root)


def test_sync_every_syncs_in_the_background_and_when_closed(store: MemoryStore, remote: Path) -> None:
    with clone(remote, "coder", sync_every=2) as coder:
        made = [coder.remember(f"Fact {n} about the search service", category="entities") for n in range(3)]
        deadline = time.monotonic() + 30
        while not on_main(remote, made[1].commit) and time.monotonic() < deadline:
            time.sleep(0.05)  # the second commit asked for a sync; the third is synced at close
        assert on_main(remote, made[1].commit)
    assert on_main(remote, made[2].commit)
    assert coder.syncer is None  # stopped with the store


def test_sync_every_from_the_command_line_stops_cleanly_on_ctrl_c(store: MemoryStore, remote: Path,
                                                                   ctrl_c: None) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "memsite", "-C", str(store.root), "sync", "--every", "1",
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    while "}" not in first:
        first += proc.stdout.readline()
    store.remember("Written between two syncs", category="events")
    deadline = time.monotonic() + 30
    while tip(remote, "main") != head(store.root) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tip(remote, "main") == head(store.root)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err
    assert json.loads(first)["status"] == "up to date"
    assert_clean(store.root)


def test_killed_syncs_and_integrations_lose_nothing(store: MemoryStore, remote: Path) -> None:
    """SIGKILL at random moments of a writing-and-syncing agent and of an integrator, then the next runs finish."""
    allow = protect_main(remote)
    agent_clone = remote.parent / "agent"
    git(remote.parent, "clone", "-q", str(remote), str(agent_clone))
    acked: list[str] = []
    for round_ in range(4):
        proc = subprocess.Popen([sys.executable, "-m", "tests.sync_process", str(agent_clone), "kenji", "50", "1"],
                                stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert proc.stdout is not None
        for _ in range(2 + round_):
            line = proc.stdout.readline()
            acked += [line.split()[1]] if line.startswith("ACK ") else []
        time.sleep(0.05 * round_)
        proc.kill()
        acked += [line.split()[1] for line in proc.communicate()[0].splitlines() if line.startswith("ACK ")]
    allow.touch()
    integrator = remote.parent / "ci"
    git(remote.parent, "clone", "-q", str(remote), str(integrator))
    for delay in (0.3, 0.6):
        proc = subprocess.Popen([sys.executable, "-m", "memsite", "-C", str(integrator), "integrate"], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.kill()
        proc.wait()
    with MemoryStore(agent_clone, agent="kenji") as agent:
        sync(storage_of(agent))
    with MemoryStore(integrator, agent="ci") as queue:
        integrate(storage_of(queue))
    files = git(remote, "ls-tree", "-r", "--name-only", "main", "content/memories").split()
    assert acked and all(any(ident[-6:].lower() in name for name in files) for ident in acked)
    for repo in (agent_clone, integrator):
        assert_clean(repo)
    assert subprocess.run(["git", "fsck", "--strict", "--no-progress"], cwd=remote).returncode == 0


def test_a_full_disk_during_sync_is_one_line_and_the_next_sync_finishes(store: MemoryStore, remote: Path,
                                                                        small_disk: Path) -> None:
    where = small_disk / "agent"
    git(remote.parent, "clone", "-q", str(remote), str(where))
    agent = MemoryStore(where, agent="kenji")
    mine = agent.remember("Written before the disk filled up", category="events")
    with clone(remote, "other") as other:
        with other.transaction("Many memories to fetch") as tx:
            for n in range(60):
                tx.remember(f"Service {n} listens on port {9000 + n}; its owner is team {n % 7}. " * 20,
                            category="entities", dedupe=False)
        sync(storage_of(other))
    filler = fill(small_disk)
    result = CliRunner().invoke(main, ["-C", str(where), "--agent", "kenji", "sync"])
    assert result.exit_code == 1 and result.output.startswith(f"Error: disk full at {where}")
    assert result.output.count("\n") == 1
    for path in small_disk.glob("filler*"):
        path.unlink()
    assert not filler.exists()
    assert sync(storage_of(agent)).status == "integrated" and on_main(remote, mine.commit)
    agent.close()
    assert_clean(where)


def test_a_remote_that_hangs_up_mid_push_is_one_line_and_loses_nothing(store: MemoryStore, remote: Path) -> None:
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\nkill -9 $PPID\n")  # the connection drops while the push is on its way
    hook.chmod(0o755)
    memory = store.remember("The VPN drops every night at 03:00", category="events")
    result = CliRunner().invoke(main, ["-C", str(store.root), "sync"])
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert "origin" in result.output and "Traceback" not in result.output
    hook.unlink()
    assert sync(storage_of(store)).status == "integrated" and on_main(remote, memory.commit)
    assert_clean(store.root)


def test_memsite_sync_processes_on_a_plain_bare_remote_with_no_queue_never_fail(tmp_path: Path,
                                                                                   store: MemoryStore) -> None:
    """The simplest team set-up: 'git init --bare' (HEAD names master), four clones writing and running
    'memsite sync' after each write at once, nobody integrating: every sync exits 0 and every memory is on main."""
    bare = tmp_path / "plain.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(store.root, "push", "-q", str(bare), "main")
    memsite = f"{sys.executable} -m memsite"
    scripts = []
    for n in range(4):
        where = tmp_path / f"clone{n}"
        git(tmp_path, "clone", "-q", "--branch", "main", str(bare), str(where))
        scripts.append(f'for i in 1 2 3 4; do {memsite} -C {where} --agent agent{n} remember "agent{n} fact $i: '
                       f'the service agent{n}-$i listens on port 90$i" -c entities && '
                       f'{memsite} -C {where} --agent agent{n} sync --json || echo FAILED; done')
    procs = [subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              cwd=ROOT) for script in scripts]
    outputs = [proc.communicate(timeout=300)[0] for proc in procs]
    assert not [out for out in outputs if "FAILED" in out or "Error" in out]
    statuses = [status for out in outputs for status in re.findall(r'"status": "([^"]+)"', out)]
    assert len(statuses) == 16 and set(statuses) <= {"integrated", "up to date"}
    on_remote = git(bare, "ls-tree", "-r", "--name-only", "main", "--", "content/memories")
    assert sum(f"agent{n}" in git(bare, "log", "--format=%an", "main") for n in range(4)) == 4
    assert len(on_remote.splitlines()) == 16
