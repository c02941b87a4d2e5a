"""Core memory: what an agent loads at start, bounded and per agent."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsite import ConfigError, MemoryStore, from_env
from memsite.cli import main
from memsite.features.core_memory import core_text, first_lines, recent_texts
from memsite.foundation.record import Memory, new_id

from .conftest import START, Clock

fixture_ok = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_an_empty_repository_has_an_empty_core(store: MemoryStore) -> None:
    assert store.load_core() == ""
    assert store.load_topic("preferences") == ""
    assert store.recent() == []


def test_the_core_holds_world_state_pinned_and_recent_memories(store: MemoryStore) -> None:
    store.world.merge({"deploy.target": "staging", "runbook": "1. drain\n2. deploy"})
    store.remember("Always run the migrations before deploying.", category="patterns", pinned=True)
    store.remember("The CI runner has 4 cores.", category="entities")
    with MemoryStore(store.root, agent="other") as other:
        other.remember("Somebody else's memory.")
    core = store.load_core()
    assert core.startswith("# World state\n\n- deploy.target: staging\n- runbook:\n  1. drain\n  2. deploy")
    assert "# Pinned memories\n\n## patterns: Always run the migrations before deploying." in core
    assert "# Recent memories of planner\n\n" in core and "- The CI runner has 4 cores." in core
    assert "Somebody else's memory." not in core


def test_the_recent_section_is_left_out_when_the_agent_has_none(store: MemoryStore) -> None:
    store.world.merge({"a": "1"})
    with MemoryStore(store.root, agent="other") as other:
        other.remember("not mine", pinned=True)
        assert "Recent memories" not in store.load_core()
        assert "# Recent memories of other" in other.load_core()


@fixture_ok
@given(st.integers(0, 6), st.integers(0, 6), st.integers(0, 60))
def test_load_core_returns_min_of_its_lines_and_the_limit(store: MemoryStore, keys: int, memories: int,
                                                          limit: int) -> None:
    store.world.merge({f"key.{i}": f"value {i}" for i in range(keys)})
    with store.transaction() as tx:
        for i in range(memories):
            tx.remember(f"memory {i}\nwith a second line", pinned=i % 2 == 0)
    def line_count(text: str) -> int:
        return len(text.split("\n")) if text else 0

    full = store.load_core(lines=10_000)
    cut = store.load_core(lines=limit)
    assert line_count(cut) == min(line_count(full), limit)
    if line_count(full) <= limit or limit == 0:
        assert cut == (full if limit else "")
    else:  # what was cut is said on the last line, with how to see it
        assert cut.split("\n")[:-1] == full.split("\n")[:limit - 1]
        assert cut.split("\n")[-1].startswith(f"[{line_count(full) - limit + 1} more line")
        assert f"'memsite core --lines {line_count(full)}' shows all" in cut.split("\n")[-1]


@settings(max_examples=200)
@given(st.lists(st.text(max_size=5), max_size=30), st.integers(0, 15))
def test_recent_keeps_at_most_n_non_empty_texts_oldest_first(texts: list[str], n: int) -> None:
    memories = [Memory(id=new_id(), category="general", abstract="a", content=text, agent="a",
                       created=START + timedelta(minutes=i), updated=START) for i, text in enumerate(texts)]
    result = recent_texts(memories, n)
    non_empty = [t for t in texts if t.strip()]
    assert len(result) == min(n, len(non_empty))
    assert result == (non_empty[max(0, len(non_empty) - n):] if n else [])


@fixture_ok
@given(st.lists(st.sampled_from(["planner", "other"]), max_size=14), st.integers(0, 12))
def test_recent_is_per_agent_and_bounded(store: MemoryStore, clock: Clock, writers: list[str], n: int) -> None:
    before = store.list(agent="planner")
    stores = {"planner": store, "other": MemoryStore(store.root, agent="other", clock=clock)}
    for i, agent in enumerate(writers):
        clock.advance(minutes=1)
        stores[agent].remember(f"{agent} memory {i}", dedupe=False)  # a text may recur across examples
    stores["other"].close()
    mine = [m.content for m in before] + [f"planner memory {i}" for i, a in enumerate(writers) if a == "planner"]
    assert store.recent(n) == (mine[max(0, len(mine) - n):] if n else [])


def test_load_topic_is_the_whole_category_in_the_entry_format(store: MemoryStore, clock: Clock) -> None:
    store.remember("Tabs, not spaces.", category="preferences")
    clock.advance(hours=2)
    store.remember("Dark mode everywhere.", category="user_pref")
    store.remember("Unrelated.", category="events")
    assert store.load_topic("preferences") == (
        "### [2026-11-01 09:00] preferences\n\nTabs, not spaces.\n\n---\n\n"
        "### [2026-11-01 11:00] preferences\n\nDark mode everywhere.\n\n---"
    )


def test_first_lines_and_core_text_edge_cases() -> None:
    assert first_lines("", 5) == "" and first_lines("a\nb\nc", 0) == "" and first_lines("a\nb", 5) == "a\nb"
    assert core_text({}, [], [], "x") == ""


def test_from_env_opens_or_creates_the_repository(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "memory"
    store = from_env({"MEMSITE_DIR": str(path), "MEMSITE_AGENT": "envagent", "MEMSITE_AUTO_LOAD_LINES": "3"})
    assert store is not None and path.is_dir() and store.agent == "envagent"
    store.world.merge({f"k{i}": "v" for i in range(5)})
    assert len(store.load_core().split("\n")) == 3
    store.close()
    again = from_env({"MEMSITE_DIR": str(path), "MEMSITE_ENABLED": "yes"})
    assert again is not None and again.auto_load_lines == 200
    again.close()


@pytest.mark.parametrize("value", ["false", "0", "no", "OFF"])
def test_from_env_returns_none_when_disabled(value: str, tmp_path: Path) -> None:
    assert from_env({"MEMSITE_ENABLED": value, "MEMSITE_DIR": str(tmp_path / "never")}) is None
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize(("name", "value"), [("MEMSITE_ENABLED", "maybe"), ("MEMSITE_AUTO_LOAD_LINES", "many"),
                                              ("MEMSITE_AUTO_LOAD_LINES", "0")])
def test_from_env_names_a_bad_variable(name: str, value: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=name):
        from_env({name: value, "MEMSITE_DIR": str(tmp_path / "m")})


def test_from_env_defaults_to_a_folder_in_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    store = from_env({})
    assert store is not None and store.root == tmp_path / ".memsite" / "memory"
    store.close()


def test_the_core_command(store: MemoryStore) -> None:
    store.world.merge({"a": "1", "b": "2", "c": "3"})
    result = CliRunner().invoke(main, ["-C", str(store.root), "core", "--lines", "4"])
    assert result.exit_code == 0 and result.output.startswith("# World state\n\n- a: 1\n[")
    assert "[2 more lines cut" in result.output and "'memsite core --lines 5' shows all" in result.output
