"""The task protocol: one commit of four steps, or nothing and a list of what is missing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsite import FormatError, InvalidInput, MemoryStore, ProtocolError
from memsite.cli import main
from memsite.features.notes import CLOSING_STEPS
from memsite.features.sessions import parse as parse_session

from .conftest import Clock, assert_clean, git, head

ROOT = Path(__file__).resolve().parent.parent


def process_file(store: MemoryStore, agent: str = "planner") -> Path:
    return store.root / "content" / "notes" / agent / "task_process.md"


def changed_files(store: MemoryStore, commit: str = "HEAD") -> list[str]:
    return sorted(git(store.root, "show", "--name-only", "--format=", commit).split())


def test_a_task_closes_with_one_commit_of_all_four_steps(store: MemoryStore, clock: Clock) -> None:
    store.world.merge({"deploy.target": "staging"})
    before = head(store.root)
    with store.task(type="debug", keywords=["undefined var", "add"]) as task:
        task.plan(["find the cause", "fix", "verify"])
        task.check("find the cause", note="NameError in add()")
        task.check("fix")
        task.check("verify")
        task.rounds += 1
        clock.advance(seconds=95)
        task.problem("add() referenced an undefined variable")
        task.solution("Defined the accumulator before the loop.")
        task.learn("pattern: undefined variable -> define it before first use")
        task.learn("check the other arithmetic helpers too")
        task.world({"ci.status": "green"})
    assert git(store.root, "rev-list", "--count", f"{before}..HEAD").strip() == "1"
    assert task.commit == head(store.root) and task.session == "2026-11-01_debug_undefined_var_add"
    learned = {m.category: m for m in store.list() if m.source == task.session}  # each learning, a memory
    assert learned["patterns"].content == "undefined variable -> define it before first use"
    assert learned["general"].content == "check the other arithmetic helpers too"
    assert changed_files(store) == sorted([
        "content/notes/planner/agent_knowledge.md",
        "content/notes/planner/task_process.md",
        "content/sessions/2026-11-01_debug_undefined_var_add.md",
        "content/world_state.md",
        *(str(m.path.relative_to(store.root)) for m in learned.values()),
    ])
    assert store.recall("arithmetic helpers")[0].memory.id == learned["general"].id  # recall finds a learning
    record = parse_session((store.root / "content/sessions/2026-11-01_debug_undefined_var_add.md").read_text(), "s")
    assert ((record.agent, record.type, record.keywords, record.outcome)
            == ("planner", "debug", ("undefined var", "add"), "succeeded"))
    assert (record.rounds, record.seconds) == (1, 95)
    assert record.problem == "add() referenced an undefined variable"
    assert record.learnings == ("pattern: undefined variable -> define it before first use",
                                "check the other arithmetic helpers too")
    text = (store.root / "content/sessions/2026-11-01_debug_undefined_var_add.md").read_text()
    for section in ("## Task information", "## Problem", "## Solution", "## Execution", "## Learnings"):
        assert section in text
    knowledge = (store.root / "content/notes/planner/agent_knowledge.md").read_text()
    assert "task_count: 1" in knowledge and "total_rounds: 1" in knowledge
    assert "- undefined variable -> define it before first use _(from 2026-11-01_debug_undefined_var_add)_" in knowledge
    world = store.world.read()
    assert world["ci.status"] == "green" and world["deploy.target"] == "staging"
    assert world["agent.planner.last_task"] == "2026-11-01_debug_undefined_var_add: succeeded at 2026-11-01T09:01:35Z"
    assert "No task in progress." in process_file(store).read_text()
    trailers = git(store.root, "log", "-1", "--format=%(trailers:only,unfold)")
    assert "Session: 2026-11-01_debug_undefined_var_add" in trailers and "Outcome: succeeded" in trailers
    assert (git(store.root, "log", "-1", "--format=%an %s").strip()
            == "planner Task debug: undefined var, add (succeeded)")
    assert_clean(store.root)


def test_start_writes_the_todo_ending_with_the_closing_steps_at_once(store: MemoryStore) -> None:
    task = store.task("feature", ["export"], plan=["design", "build"])
    text = process_file(store).read_text()
    assert text.index("- [ ] design") < text.index("- [ ] build") < text.index("## Closing steps")
    for step in CLOSING_STEPS:
        assert f"- [ ] {step}" in text
    task.check("design", note="two formats")
    assert "- [x] design (two formats)" in process_file(store).read_text()
    task.add("document")
    task.drop("build")
    todo = process_file(store).read_text()
    assert "- [ ] document" in todo and "build" not in todo.split("## Closing steps")[0].split("## Plan")[1]
    # Working memory lives in the working tree until the task closes.
    assert git(store.root, "status", "--porcelain", "--untracked-files=all").strip() == \
        "?? content/notes/planner/task_process.md"
    task.release()


@pytest.mark.parametrize("missing", ["problem", "solution"])
def test_closing_without_the_record_commits_nothing_and_says_what_is_missing(store: MemoryStore, missing: str) -> None:
    before = head(store.root)
    with pytest.raises(ProtocolError) as info:
        with store.task("fix", ["typo"]) as task:
            if missing != "problem":
                task.problem("a typo in the docs")
            if missing != "solution":
                task.solution("fixed it")
    assert head(store.root) == before
    assert info.value.missing == [CLOSING_STEPS[0]]
    assert f"task.{missing}(...)" in str(info.value) and "nothing was committed" in str(info.value)
    # The task stays open: the working memory is there to resume from.
    with store.task() as resumed:
        assert resumed.resumed
        resumed.problem("a typo in the docs")
        resumed.solution("fixed it")
    assert head(store.root) != before
    assert_clean(store.root)


def break_knowledge(store: MemoryStore) -> None:
    path = store.root / "content" / "notes" / "planner" / "agent_knowledge.md"
    path.write_text("---\nagent: planner\ntask_count: lots\n---\n")
    git(store.root, "add", str(path))
    git(store.root, "commit", "-qm", "a broken knowledge file")


def break_world(store: MemoryStore) -> None:
    path = store.root / "content" / "world_state.md"
    path.write_text(path.read_text() + "\n## k\n\n1\n\n## k\n\n2\n")
    git(store.root, "commit", "-qm", "duplicate key", str(path))


def test_unreadable_knowledge_or_world_stops_a_task_at_start(store: MemoryStore) -> None:
    (store.root / "content" / "notes" / "planner").mkdir(parents=True)
    break_knowledge(store)
    for _ in range(2):  # the second start fails the same way: the agent's lock was released
        with pytest.raises(FormatError, match="agent_knowledge.md: field 'task_count'"):
            store.task("fix", ["x"])
    with MemoryStore(store.root, agent="other") as other:
        break_world(store)
        with pytest.raises(FormatError, match="world_state.md: line .* key 'k' appears twice"):
            other.task("fix", ["y"])


def test_a_knowledge_file_broken_during_the_task_fails_that_step(store: MemoryStore) -> None:
    before = head(store.root)
    with pytest.raises(ProtocolError) as info:
        with store.task("fix", ["x"]) as task:
            task.problem("p")
            task.solution("s")
            break_knowledge(store)
    assert info.value.missing == [CLOSING_STEPS[1]]
    assert "field 'task_count'" in str(info.value)
    assert git(store.root, "rev-parse", "HEAD^").strip() == before  # only the breaking commit


def test_a_world_state_broken_during_the_task_fails_that_step(store: MemoryStore) -> None:
    with pytest.raises(ProtocolError) as info:
        with store.task("fix", ["x"]) as task:
            task.problem("p")
            task.solution("s")
            break_world(store)
    assert info.value.missing == [CLOSING_STEPS[2]]


def test_working_memory_someone_else_changed_is_not_cleared(store: MemoryStore) -> None:
    before = head(store.root)
    with pytest.raises(ProtocolError) as info:
        with store.task("fix", ["x"]) as task:
            task.problem("p")
            task.solution("s")
            process_file(store).write_text(process_file(store).read_text() + "\nedited by a person\n")
    assert info.value.missing == [CLOSING_STEPS[3]]
    assert head(store.root) == before
    assert "edited by a person" in process_file(store).read_text()


def test_every_missing_step_is_listed_together(store: MemoryStore) -> None:
    (store.root / "content" / "notes" / "planner").mkdir(parents=True)
    with pytest.raises(ProtocolError) as info:
        with store.task("fix", ["x"]) as task:
            task.solution("s")
            break_knowledge(store)
            break_world(store)
            task.problem("p")
    assert info.value.missing == [CLOSING_STEPS[1], CLOSING_STEPS[2]]
    assert str(info.value).count("- [ ] ") == 2


def test_an_exception_in_the_block_is_recorded_as_failed_then_raised(store: MemoryStore) -> None:
    with pytest.raises(ZeroDivisionError):
        with store.task("debug", ["division"]) as task:
            task.rounds = 2
            task.problem("the average of an empty list")
            raise ZeroDivisionError("division by zero")
    record = parse_session((store.root / f"content/sessions/{task.session}.md").read_text(), "s")
    assert record.outcome == "failed" and record.error == "ZeroDivisionError: division by zero"
    assert record.rounds == 2
    assert "Outcome: failed" in git(store.root, "log", "-1", "--format=%B")
    assert store.world.read()["agent.planner.last_task"].startswith(f"{task.session}: failed")
    assert "No task in progress." in process_file(store).read_text()
    assert_clean(store.root)


def test_an_error_message_holding_a_secret_is_not_recorded(store: MemoryStore) -> None:
    with pytest.raises(RuntimeError):
        with store.task("debug", ["auth"]) as task:
            raise RuntimeError("login failed for ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6")
    record = (store.root / f"content/sessions/{task.session}.md").read_text()
    assert "ghp_" not in record and "message withheld" in record


def test_a_crash_mid_task_leaves_working_memory_to_resume(store: MemoryStore) -> None:
    script = f"""
import os, signal
from memsite import MemoryStore
store = MemoryStore({str(store.root)!r}, agent="planner")
task = store.task("refactor", ["parser"], plan=["split the module", "move tests", "benchmark"])
task.check("split the module", note="lexer and parser apart")
task.rounds = 3
task.problem("one module of 2,000 lines")
task.world({{"parser.layout": "split"}})
os.kill(os.getpid(), signal.SIGKILL)
"""
    crashed = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert crashed.returncode == -signal.SIGKILL
    before = head(store.root)
    with store.task("refactor", ["parser"]) as task:
        assert task.resumed
        assert task.todo == [("split the module", True, "lexer and parser apart"), ("move tests", False, ""),
                             ("benchmark", False, "")]
        assert task.rounds == 3
        task.check("move tests")
        task.solution("Split into lexer.py and parser.py.")
    assert git(store.root, "rev-list", "--count", f"{before}..HEAD").strip() == "1"
    record = parse_session((store.root / f"content/sessions/{task.session}.md").read_text(), "s")
    assert record.problem == "one module of 2,000 lines" and record.rounds == 3
    assert store.world.read()["parser.layout"] == "split"
    assert_clean(store.root)


def test_a_different_task_does_not_silently_replace_an_unfinished_one(store: MemoryStore) -> None:
    store.task("refactor", ["parser"], plan=["split"]).release()
    with pytest.raises(ProtocolError, match=r"unfinished task \(refactor: parser"):
        store.task("debug", ["something else"])
    task = store.task()
    commit = task.abandon("superseded by the rewrite")
    record = parse_session((store.root / f"content/sessions/{task.session}.md").read_text(), "s")
    assert record.outcome == "abandoned" and record.error == "superseded by the rewrite"
    assert commit == head(store.root)
    with pytest.raises(ProtocolError, match="no task in progress"):
        store.task()


def test_one_agent_cannot_run_two_tasks_at_once(store: MemoryStore) -> None:
    task = store.task("fix", ["a"])
    with MemoryStore(store.root, agent="planner") as same_agent:
        with pytest.raises(ProtocolError, match="already has a task open"):
            same_agent.task("fix", ["b"])
    with MemoryStore(store.root, agent="reviewer") as other_agent:
        other_agent.task("review", ["pr 12"]).release()  # other agents are not blocked
    task.release()


def test_agents_notes_are_kept_apart(store: MemoryStore) -> None:
    with MemoryStore(store.root, agent="reviewer") as reviewer:
        with reviewer.task("review", ["pr"]) as task:
            task.problem("review the PR")
            task.solution("approved")
    files = changed_files(store)
    assert all("/notes/planner/" not in f for f in files)
    assert "content/notes/reviewer/agent_knowledge.md" in files
    assert not (store.root / "content" / "notes" / "planner" / "agent_knowledge.md").exists()


def test_known_patterns_are_matched_at_start_and_recorded(store: MemoryStore) -> None:
    with store.task("debug", ["undefined var", "add"]) as first:
        first.problem("p")
        first.solution("s")
        first.learn("pattern: undefined variable -> define it before first use")
        first.learn("pattern: flaky test -> look for shared temp dirs")
    with store.task("debug", ["undefined var", "multiply"]) as second:
        assert second.known_patterns[0] == "undefined variable -> define it before first use"
        second.problem("p")
        second.solution("applied the known fix")
        second.learn("pattern: undefined variable -> define it before first use")  # not added twice
    record = parse_session((store.root / f"content/sessions/{second.session}.md").read_text(), "s")
    assert record.pattern == "undefined variable -> define it before first use"
    knowledge = (store.root / "content/notes/planner/agent_knowledge.md").read_text()
    assert knowledge.count("undefined variable -> define it") == 1 and "task_count: 2" in knowledge


def test_session_names_never_collide_and_records_are_append_only(store: MemoryStore) -> None:
    names = []
    for _ in range(3):
        with store.task("fix", ["same words"]) as task:
            task.problem("p")
            task.solution("s")
        names.append(task.session)
    assert names == ["2026-11-01_fix_same_words", "2026-11-01_fix_same_words_2", "2026-11-01_fix_same_words_3"]
    with pytest.raises(InvalidInput, match="append-only"):
        with store.transaction() as tx:
            tx.write_text(f"content/sessions/{names[0]}.md", "rewritten")


def test_check_reports_session_records_changed_or_deleted_since_a_revision(store: MemoryStore) -> None:
    for words in (["one"], ["two"]):
        with store.task("fix", words) as task:
            task.problem("p")
            task.solution("s")
    base = head(store.root)
    sessions = store.root / "content" / "sessions"
    first, second = sorted(sessions.glob("*.md"))
    first.write_text(first.read_text().replace("## Solution\n\ns", "## Solution\n\nrewritten history"))
    second.unlink()
    git(store.root, "commit", "-qam", "tamper with the event log")
    result = CliRunner().invoke(main, ["-C", str(store.root), "check", "--base", base])
    assert result.exit_code == 1
    assert f"content/sessions/{first.name}: session record changed since {base}" in result.output
    assert f"content/sessions/{second.name}: session record deleted since {base}" in result.output
    assert CliRunner().invoke(main, ["-C", str(store.root), "check", "--base", "HEAD"]).exit_code == 0


def test_texts_are_checked_when_given(store: MemoryStore) -> None:
    task = store.task("fix", ["x"])
    with pytest.raises(InvalidInput, match="no TODO item 'nope'"):
        task.check("nope")
    with pytest.raises(InvalidInput, match="learning: contains a NUL"):
        task.learn("a\x00b")
    with pytest.raises(InvalidInput, match="rounds"):
        task.rounds = -1
    with pytest.raises(InvalidInput, match="task type"):
        store.task("!!!", ["x"])
    task.release()
    with pytest.raises(InvalidInput, match="keyword"):
        store.task("fix", ["a\nb"])


def test_the_protocol_driven_from_a_shell(store: MemoryStore) -> None:
    def run(*args: str):
        result = CliRunner().invoke(main, ["-C", str(store.root), "--agent", "fixer", "task", *args])
        assert result.exit_code == 0, result.output
        return result.output

    started = run("start", "debug", "undefined var", "add", "--plan", "find the cause", "--plan", "fix")
    assert "- [ ] find the cause" in started
    run("check", "find the cause", "--note", "NameError in add()")
    run("round")
    assert "- [x] find the cause (NameError in add())" in run("show")
    run("check", "fix")
    out = run("finish", "--problem", "add() failed", "--solution", "defined x", "--learn", "pattern: define first",
              "--world", "ci.status=green")
    assert out.startswith("Closed ") and "_debug_undefined_var_add (commit " in out
    assert store.world.read()["ci.status"] == "green"
    failed = CliRunner().invoke(main, ["-C", str(store.root), "--agent", "fixer", "task", "show"])
    assert failed.exit_code == 1 and "no task in progress" in failed.output
    assert_clean(store.root)


def shell(store: MemoryStore, *args: str):
    return CliRunner().invoke(main, ["-C", str(store.root), "--agent", "fixer", "task", *args])


def test_task_show_after_start_is_no_resume_but_a_second_start_is(store: MemoryStore) -> None:
    started = shell(store, "start", "debug", "flaky", "--plan", "look")
    assert started.output.startswith("debug: flaky (round 0)\n")
    for _ in range(2):
        shown = shell(store, "show")
        assert shown.exit_code == 0 and shown.output.startswith("debug: flaky (round 0)\n"), shown.output
    assert shell(store, "start", "debug", "flaky").output.startswith("debug: flaky (round 0) [resumed]\n")


def test_finishing_with_plan_items_unchecked_asks_for_force_and_records_partial(store: MemoryStore) -> None:
    shell(store, "start", "fix", "typo", "--plan", "find it", "--plan", "fix it", "--plan", "release")
    shell(store, "check", "find it")
    before = head(store.root)
    refused = shell(store, "finish", "--problem", "a typo", "--solution", "fixed", "--learn", "proofread")
    assert refused.exit_code == 1 and len(refused.output.splitlines()) == 1
    assert refused.output == (
        "Error: the plan has 2 item(s) not checked: 'fix it', 'release'; check them ('memsite task check ITEM'), "
        "drop them ('memsite task drop ITEM') or give --force to record the task as partial; the task stays "
        "open, nothing was committed\n")
    assert head(store.root) == before
    closed = shell(store, "finish", "--problem", "a typo", "--solution", "fixed", "--learn", "proofread", "--force")
    assert closed.exit_code == 0, closed.output
    assert closed.output.startswith("Closed ") and " as partial (commit " in closed.output
    assert git(store.root, "log", "-1", "--format=%s").strip() == "Task fix: typo (partial)"
    record = parse_session(next((store.root / "content" / "sessions").glob("*_fix_typo.md")).read_text(), "s")
    assert record.outcome == "partial" and record.learnings == ("proofread",)  # once, though given twice
    assert [(item, done) for item, done, _ in record.plan] == [("find it", True), ("fix it", False), ("release", False)]


def test_a_task_closed_from_python_with_items_unchecked_is_partial(store: MemoryStore) -> None:
    with store.task("fix", ["typo"], plan=["find it", "fix it"]) as task:
        task.check("find it")
        task.problem("a typo")
        task.solution("fixed")
    assert "Outcome: partial" in git(store.root, "log", "-1", "--format=%B")
    assert store.world.read()["agent.planner.last_task"].endswith(": partial at 2026-11-01T09:00:00Z")
