"""Hostile or unlucky input: values that would wedge merges, a task closed twice, caps, a full disk,
terminal escapes in memory text, unreachable remotes. Each meets one clear error, and nothing is written."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsite import DiskFull, InvalidInput, MemoryStore, MemsiteError, ProtocolError
from memsite.cli import main

from . import faults
from .conftest import assert_clean, git, head

ESCAPE = "\x1b]0;pwned\x07"
BIDI = "\u202e"


def run(repo: Path, *args: str, input: str | None = None, agent: str = "cli-agent"):
    return CliRunner().invoke(main, ["-C", str(repo), "--agent", agent, *args], input=input)


def sessions(store: MemoryStore) -> list[str]:
    return sorted(p.name for p in (store.root / "content" / "sessions").glob("*.md"))


def set_setting(store: MemoryStore, line: str) -> MemoryStore:
    """The store reopened with ``line`` added under the memsite plugin's settings in mkdocs.yml."""
    path = store.root / "mkdocs.yml"
    key = line.split(":")[0]
    lines = [text for text in path.read_text().splitlines() if not text.strip().startswith(f"{key}:")]
    text = "\n".join(lines) + "\n"
    path.write_text(text.replace("  memsite:\n", f"  memsite:\n    {line}\n", 1))
    store.close()
    return MemoryStore(store.root, agent=store.agent)


# --- values that wedge ------------------------------------------------------------


@pytest.mark.parametrize("marker", ["<<<<<<< HEAD", "=======", ">>>>>>> theirs", "|||||||"])
def test_a_world_value_holding_a_conflict_marker_line_is_refused(store: MemoryStore, marker: str) -> None:
    before = head(store.root)
    with pytest.raises(InvalidInput, match=r"world value for 'notes' line 2: starts with .* conflict marker"):
        store.world.merge({"notes": f"first line\n{marker}\nlast line"})
    task = store.task("debug", ["markers"])
    with pytest.raises(InvalidInput, match="conflict marker"):
        task.world({"notes": f"x\n{marker}"})
    task.release()
    assert head(store.root) == before
    store.world.merge({"notes": "a line\n  ======= (indented: not a marker)"})  # still usable afterwards
    assert store.world.read()["notes"].endswith("======= (indented: not a marker)")


def test_the_cli_refuses_a_conflict_marker_and_world_merges_keep_working(tmp_path: Path) -> None:
    repo = tmp_path / "memory"
    assert CliRunner().invoke(main, ["init", str(repo)]).exit_code == 0
    refused = run(repo, "world", "set", "deploy", "-", input="staging\n<<<<<<< ours\nprod\n")
    assert refused.exit_code == 1 and "conflict marker" in refused.output and "Traceback" not in refused.output
    assert run(repo, "world", "set", "deploy", "staging").exit_code == 0
    assert run(repo, "world", "show", "deploy").output == "staging\n"


def test_world_merge_wants_a_mapping(store: MemoryStore) -> None:
    with pytest.raises(InvalidInput) as info:
        store.world.merge("a=b")  # type: ignore[arg-type]
    assert str(info.value) == "world.merge: expected a mapping of key -> value, got str"
    with pytest.raises(InvalidInput, match="remove expects a list of keys, got int"):
        store.world.merge(remove=3)  # type: ignore[arg-type]


def test_a_task_closes_exactly_once(store: MemoryStore) -> None:
    task = store.task("debug", ["twice"])
    task.problem("p")
    task.solution("s")
    first = task.finish()
    for close in (task.finish, lambda: task.abandon("changed my mind")):
        with pytest.raises(ProtocolError, match="already closed .* a task closes once"):
            close()
    assert head(store.root) == first
    assert len(sessions(store)) == 1
    with pytest.raises(ProtocolError, match="the task is closed"):
        task.problem("more")


def test_task_finish_twice_through_the_cli_commits_one_session(tmp_path: Path) -> None:
    repo = tmp_path / "memory"
    assert CliRunner().invoke(main, ["init", str(repo)]).exit_code == 0
    assert run(repo, "task", "start", "debug", "twice").exit_code == 0
    first = run(repo, "task", "finish", "--problem", "p", "--solution", "s")
    assert first.exit_code == 0, first.output
    commit = head(repo)
    for again in (["task", "finish", "--problem", "p", "--solution", "s"], ["task", "abandon", "why"]):
        result = run(repo, *again)
        assert result.exit_code == 1 and "has no task in progress" in result.output
        assert "Traceback" not in result.output
    assert head(repo) == commit
    assert len(list((repo / "content" / "sessions").glob("*.md"))) == 1


def test_world_merge_and_task_world_share_one_cap_named_max_world_bytes(store: MemoryStore) -> None:
    store = set_setting(store, "max_world_bytes: 3000")
    before = head(store.root)
    with pytest.raises(InvalidInput, match=r"over the 3000-byte cap \(plugins.memsite.max_world_bytes\)"):
        store.world.merge({"big": "x" * 3500})  # one value over the cap
    with pytest.raises(InvalidInput, match=r"world state: would be \d+ bytes, over the 3000-byte cap "
                                           r"\(plugins.memsite.max_world_bytes\)"):
        store.world.merge({f"k{i}": "y" * 900 for i in range(4)})  # the file over the cap
    task = store.task("debug", ["cap"])
    task.world({"a": "z" * 1000})
    with pytest.raises(InvalidInput, match=r"\(plugins.memsite.max_world_bytes\)"):
        for i in range(5):
            task.world({f"b{i}": "z" * 900})
    task.release()
    assert head(store.root) == before
    store.close()


def test_the_memory_cap_message_names_max_memory_bytes(store: MemoryStore) -> None:
    store = set_setting(store, "max_memory_bytes: 100")
    with pytest.raises(InvalidInput, match=r"content: is 200 bytes, over the 100-byte cap "
                                           r"\(plugins.memsite.max_memory_bytes\); split it"):
        store.remember("w" * 200)
    store.close()


# --- one error tree ------------------------------------------------------------------


def test_cli_numbers_are_bounded_and_no_overflow_reaches_a_traceback(tmp_path: Path) -> None:
    repo = tmp_path / "memory"
    assert CliRunner().invoke(main, ["init", str(repo)]).exit_code == 0
    for args in (["recall", "x", "-n", "99999999999999999999"], ["rank", "-n", "0"], ["core", "--lines", "-1"],
                 ["skills", "--threshold", "10000000000"], ["recall", "x", "--min-score", "-1"]):
        result = run(repo, *args)
        assert result.exit_code == 2 and "is not in the range" in result.output, (args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit)


def test_api_limits_beyond_sqlite_mean_all(store: MemoryStore) -> None:
    store.remember("The staging cluster is vega")
    assert len(store.recall("staging", limit=10**30)) == 1
    with pytest.raises(InvalidInput, match="min_score: expected a number"):
        store.recall("staging", min_score="high")  # type: ignore[arg-type]


def test_an_unexpected_error_is_one_line_unless_debug(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "memory"
    assert CliRunner().invoke(main, ["init", str(repo)]).exit_code == 0

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("catalog row")

    monkeypatch.setattr(MemoryStore, "list", broken)
    result = run(repo, "list")
    assert result.exit_code == 1
    assert result.output == ("Error: unexpected KeyError: 'catalog row'; rerun with --debug for the traceback\n")
    debug = CliRunner().invoke(main, ["-C", str(repo), "--debug", "list"])
    assert isinstance(debug.exception, KeyError)  # the traceback is shown


def temp_files(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob("*")
            if p.name.startswith("tmp_obj_") or p.name.endswith(".memsite-tmp") or p.name.startswith(".memsite-tmp-")]


def test_a_full_disk_is_one_error_and_nothing_is_written(small_disk: Path) -> None:
    store = MemoryStore.init(small_disk / "memory", agent="planner")
    store.remember("written while there was room")
    before = head(store.root)
    filler = faults.fill(small_disk)
    with pytest.raises(DiskFull) as info:
        store.remember("A memory long enough to need new objects. " * 200, category="events")
    assert str(info.value).startswith("disk full at ") and "nothing was written" in str(info.value)
    assert isinstance(info.value, MemsiteError)
    assert head(store.root) == before
    assert temp_files(store.root) == []
    cli = run(store.root, "remember", "another one")
    assert cli.exit_code == 1 and cli.output.startswith("Error: disk full at ") and cli.output.count("\n") == 1
    store.close()
    for path in small_disk.glob("filler*"):
        path.unlink()
    assert filler.exists() is False
    with MemoryStore(small_disk / "memory", agent="planner") as again:
        again.remember("written once there was room again")
        assert head(again.root) != before
    assert_clean(small_disk / "memory")


def test_a_store_reads_on_a_full_disk_and_writes_again_once_there_is_room(small_disk: Path) -> None:
    # Found by a tester (issue 32): once the disk filled, opening a store to read raised DiskFull, so no one
    # could even list what was there. The catalog has to be made again here, where there is no room for it.
    # (The CLI's reads on a full disk are in the fault suite: tests/faults.py, full_disk_round.)
    store = MemoryStore.init(small_disk / "memory", agent="planner")
    memory = store.remember("Deploys freeze on Fridays", category="preferences")
    pinned = store.remember("The on-call phone is in the red drawer", category="entities", pinned=True)
    store.close()
    (store.root / ".memsite" / "catalog.sqlite3").unlink()
    before = head(store.root)
    filler = faults.fill(small_disk)
    with MemoryStore(store.root, agent="planner") as reader:
        assert [m.id for m in reader.list()] == [memory.id, pinned.id]
        assert reader.recall("Fridays")[0].memory.id == memory.id
        assert "red drawer" in reader.load_core()
        with pytest.raises(DiskFull, match=r"^disk full at .*; nothing was written \(free some space and retry\)$"):
            reader.remember("Not while the disk is full")
        assert head(store.root) == before and temp_files(store.root) == []
        for path in small_disk.glob("filler*"):
            path.unlink()
        assert not filler.exists()
        again = reader.remember("Written once there was room again")  # the same store, its files on disk again
    assert head(store.root) == again.commit != before
    with MemoryStore(store.root, agent="planner") as reopened:
        assert {m.id for m in reopened.list()} == {memory.id, pinned.id, again.id}
    assert_clean(store.root)


# --- terminal escapes ------------------------------------------------------------------


def test_cli_output_escapes_control_characters_and_bidi_overrides(tmp_path: Path) -> None:
    repo = tmp_path / "memory"
    assert CliRunner().invoke(main, ["init", str(repo)]).exit_code == 0
    text = f"Deploy notes {ESCAPE} for {BIDI}exe.txt and \x9b2J"
    made = run(repo, "remember", text, "--json")
    assert made.exit_code == 0
    mid = json.loads(made.output)["id"]
    for args in (["list"], ["show", mid], ["recall", "deploy"], ["rank"]):
        out = run(repo, *args).output
        assert "\x1b" not in out and BIDI not in out and "\x07" not in out and "\x9b" not in out, args
        assert "\\x1b]0;pwned\\x07" in out and "\\u202eexe.txt" in out and "\\x9b2J" in out, args
    for args in (["list", "--json"], ["show", mid, "--json"], ["recall", "deploy", "--json"]):
        out = run(repo, *args).output
        assert BIDI not in out and "\x9b" not in out and "\x1b" not in out, args
        data = json.loads(out)
        first = data[0] if isinstance(data, list) else data
        assert first["content"] == text, args  # JSON decodes to exactly the stored text
    world = run(repo, "world", "set", "motd", f"hi {ESCAPE}")
    assert world.exit_code == 0
    assert run(repo, "world", "show").output == "motd: hi \\x1b]0;pwned\\x07\n"


# --- sync ---------------------------------------------------------------------------------


def test_sync_tells_no_remote_unknown_remote_and_unreachable_remote_apart(tmp_path: Path) -> None:
    repo = tmp_path / "memory"
    assert CliRunner().invoke(main, ["init", str(repo)]).exit_code == 0
    none = run(repo, "sync")
    assert none.exit_code == 1 and "no git remote is configured to sync with" in none.output
    git(repo, "remote", "add", "origin", str(tmp_path / "missing.git"))
    unknown = run(repo, "sync", "--remote", "upstream")
    assert unknown.exit_code == 1 and "no git remote named 'upstream'; this clone has origin" in unknown.output
    before = head(repo)
    unreachable = run(repo, "sync")
    assert unreachable.exit_code == 1
    assert unreachable.output.startswith("Error: cannot reach the remote origin (")
    assert "does not appear to be a git repository" in unreachable.output
    assert "push" not in unreachable.output.split(")")[0]
    assert head(repo) == before
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "missing.git")], check=True)
    created = run(repo, "sync")
    assert created.exit_code == 0 and created.output.startswith("Synced with origin/main (created it)")
    assert run(repo, "sync").output.startswith("Up to date with origin/main")
    assert os.path.isdir(tmp_path / "missing.git")
