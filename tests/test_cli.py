"""The memsite command, run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from memsite import MemoryStore
from memsite.cli import main

from .conftest import assert_clean, git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "memory"
    result = CliRunner().invoke(main, ["init", str(path)])
    assert result.exit_code == 0, result.output
    return path


def run(repo: Path, *args: str, input: str | None = None, agent: str = "cli-agent"):
    return CliRunner().invoke(main, ["-C", str(repo), "--agent", agent, *args], input=input)


def test_init_remember_list_show_forget(repo: Path) -> None:
    made = run(repo, "remember", "User prefers tabs over spaces", "-c", "user_pref", "-t", "python", "-t", "style")
    assert made.exit_code == 0, made.output
    assert made.output.startswith("Created ") and " in preferences (commit " in made.output
    listed = run(repo, "list")
    assert "preferences" in listed.output and "cli-agent" in listed.output and "User prefers tabs" in listed.output
    mid = json.loads(run(repo, "list", "--json").output)[0]["id"]
    shown = run(repo, "show", mid)
    assert shown.exit_code == 0
    assert f"id:        {mid}" in shown.output and "tags:      python, style" in shown.output
    assert shown.output.rstrip().endswith("User prefers tabs over spaces")
    gone = run(repo, "forget", mid, "--reason", "superseded")
    assert gone.exit_code == 0 and gone.output.startswith(f"Forgot {mid} (commit ")
    assert "Reason: superseded" in git(repo, "log", "-1", "--format=%B")
    assert_clean(repo)


def test_remember_reads_standard_input(repo: Path) -> None:
    result = run(repo, "remember", "-", "--category", "events", "--json", input="Release 1.4 shipped\n\nNo rollback.")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["category"] == "events" and data["content"] == "Release 1.4 shipped\n\nNo rollback."
    assert data["agent"] == "cli-agent" and data["commit"]


def test_the_agent_comes_from_the_environment(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSITE_AGENT", "from-env")
    monkeypatch.setenv("MEMSITE_DIR", str(repo))
    result = CliRunner().invoke(main, ["remember", "hello"])
    assert result.exit_code == 0, result.output
    assert git(repo, "log", "-1", "--format=%an").strip() == "from-env"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["remember", "key AKIAQWERTYUIOPASDF23"], "rule aws-access-key-id"),
        (["remember", "x", "-c", "nope"], "category 'nope' is unknown"),
        (["remember", ""], "content: is empty"),
        (["remember", "x", "-t", "../up"], "tag '../up'"),
        (["show", "NOPE"], "no memory with id 'NOPE'"),
        (["forget", "NOPE"], "no memory with id 'NOPE'"),
    ],
)
def test_errors_are_one_line_without_a_traceback(repo: Path, args: list[str], message: str) -> None:
    result = run(repo, *args)
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_a_bad_agent_name_is_an_error(repo: Path) -> None:
    result = run(repo, "remember", "x", agent="../escape")
    assert result.exit_code == 1 and "agent '../escape'" in result.output


def test_commands_outside_a_repository_say_what_to_do(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["-C", str(tmp_path), "list"])
    assert result.exit_code == 1 and "memsite init" in result.output


def test_trim_reports_what_it_did(repo: Path) -> None:
    for i in range(3):
        run(repo, "remember", f"case {i}", "-c", "cases")
    uncapped = run(repo, "trim", "cases")
    assert uncapped.exit_code == 1 and uncapped.output.count("\n") == 1
    assert "cases has no capacity marks, so it is never trimmed" in uncapped.output
    settings = repo / "mkdocs.yml"
    settings.write_text(settings.read_text().replace(
        "        # capacity: {lines: {high: 500, low: 400}}", "        capacity: {entries: {high: 2, low: 1}}"))
    git(repo, "commit", "-qam", "cap cases")
    result = run(repo, "trim", "cases")
    assert result.exit_code == 0 and result.output.startswith("Trimmed 2 memories: ")


def test_check_passes_a_valid_repository_and_lists_every_problem(repo: Path) -> None:
    run(repo, "remember", "fine", "-c", "cases")
    run(repo, "remember", "also fine", "-c", "events")
    ok = run(repo, "check")
    assert ok.exit_code == 0, ok.output
    files = sorted((repo / "content" / "memories").rglob("*.md"))
    files[0].write_text(files[0].read_text().replace("active_count: 0", "active_count: lots"))
    (repo / "content" / "memories" / "recipes").mkdir()
    (repo / "content" / "memories" / "recipes" / "r.md").write_text(files[1].read_text())
    (repo / "content" / "memories" / "events" / "copy.md").write_text(files[1].read_text())
    (repo / "content" / "memories" / "stray.md").write_text("x")
    bad = run(repo, "check")
    assert bad.exit_code == 1
    lines = bad.output.strip().splitlines()
    assert any("field 'active_count'" in line and line.startswith("content/memories/cases/") for line in lines)
    assert any("folder 'recipes' is not a configured category" in line for line in lines)
    assert any("copy.md: field 'id'" in line and "is also the id of" in line for line in lines)
    assert any(line.startswith("content/memories/stray.md: not in a category and month folder") for line in lines)
    month = files[1].parent.parent.name  # the month it was created in
    assert lines[0] == ("warning: content/memories/events/copy.md: in the flat layout; 'memsite migrate' moves it "
                        f"into a numbered folder of content/memories/events/{month}/")  # not a failure by itself
    assert len(lines) == 5


def test_check_reports_a_category_over_capacity(repo: Path) -> None:
    for i in range(3):
        run(repo, "remember", f"case {i}", "-c", "cases")
    settings = repo / "mkdocs.yml"
    settings.write_text(settings.read_text().replace(
        "        # capacity: {lines: {high: 500, low: 400}}", "        capacity: {entries: {high: 2, low: 1}}"))
    result = run(repo, "check")
    assert result.exit_code == 1
    assert "content/memories/cases: 3 entries, over the capacity of 2; run 'memsite trim cases'" in result.output


def test_every_command_has_help_with_an_example() -> None:
    def commands(group: click.Group, prefix: list[str]):
        for name, command in group.commands.items():
            yield [*prefix, name], command
            if isinstance(command, click.Group):
                yield from commands(command, [*prefix, name])

    for path, command in commands(main, []):
        result = CliRunner().invoke(main, [*path, "--help"])
        assert result.exit_code == 0
        assert "Example" in result.output, f"memsite {' '.join(path)} --help has no example"
        assert command.help and command.help.strip()


def test_python_dash_m_and_the_console_script_agree(repo: Path) -> None:
    for number, command in enumerate(([sys.executable, "-m", "memsite"], ["memsite"])):
        text = ("The build server is called orion", "Deploys happen on Thursdays")[number]
        result = subprocess.run([*command, "-C", str(repo), "--agent", "proc", "remember", text],
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
    with MemoryStore(repo) as store:
        assert [m.agent for m in store.list()] == ["proc", "proc"]
    failed = subprocess.run([sys.executable, "-m", "memsite", "-C", str(repo), "show", "nope"],
                            capture_output=True, text=True)
    assert failed.returncode == 1 and failed.stderr.strip() == "Error: no memory with id 'nope'; 'memsite list' shows the ids"
