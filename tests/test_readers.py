"""What a reader or reviewer meets on the command line: each message says what happened, in one line."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsite import MemoryStore
from memsite.cli import main
from memsite.foundation.record import short_id

from .sites import env


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "memory"
    assert CliRunner().invoke(main, ["init", str(path)]).exit_code == 0
    return path


def run(repo: Path, *args: str, agent: str = "cli-agent"):
    return CliRunner().invoke(main, ["-C", str(repo), "--agent", agent, *args])


def test_remember_says_created_merged_or_skipped_and_json_has_action(repo: Path) -> None:
    created = run(repo, "remember", "The staging cluster is called vega and runs in eu-central-1", "-c", "entities")
    assert created.output.startswith("Created ") and "(commit " in created.output
    first = created.output.split()[1]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()

    skipped = run(repo, "remember", "the staging cluster is called VEGA and runs in eu-central-1.", "-c", "entities")
    assert skipped.output == f"Skipped: duplicate of {first} in entities; nothing written\n"
    assert subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                          text=True).stdout.strip() == head  # and nothing was committed

    merged = run(repo, "remember", "The staging cluster is called vega and runs in eu-central-1, three zones",
                 "-c", "entities")
    assert merged.output.startswith(f"Merged into {first} in entities (commit ")

    new = json.loads(run(repo, "remember", "Production is orion", "-c", "entities", "--json").output)
    assert new["action"] == "created" and new["duplicate_of"] is None and new["commit"]
    again = json.loads(run(repo, "remember", "production is Orion!", "-c", "entities", "--json").output)
    assert again["action"] == "skipped" and again["duplicate_of"] == new["id"] and again["commit"] is None


def test_a_stop_word_recall_returns_nothing_and_says_why(repo: Path) -> None:
    run(repo, "remember", "Deploys go through make release", "-c", "patterns")
    result = run(repo, "recall", "the and of")
    assert result.exit_code == 0
    assert "only common words" in result.output and "Deploys" not in result.output
    with MemoryStore(repo, agent="reader") as store:
        assert store.recall("the and of") == []
        assert store.recall("the deploys")  # a word that says something still finds it


def test_core_says_what_a_small_budget_cut(repo: Path) -> None:
    with MemoryStore(repo, agent="planner") as store:
        store.world.merge({f"key.{i:02}": f"value {i}" for i in range(30)})
        store.remember("1. Merge to main.\n2. Tag the commit.\n3. Watch the canary.", category="patterns",
                       abstract="Releasing a service")
    full = run(repo, "core", agent="planner").output
    assert "- Releasing a service:\n  1. Merge to main.\n  2. Tag the commit.\n  3. Watch the canary." in full
    cut = run(repo, "core", "--lines", "10", agent="planner").output.rstrip("\n").split("\n")
    assert len(cut) == 10
    assert "Recent memories of planner" in cut[-1] and "memsite core --lines" in cut[-1]


def test_task_commands_confirm_and_speak_shell(repo: Path) -> None:
    missing = run(repo, "task", "show")
    assert missing.exit_code == 1 and "'memsite task start TYPE KEYWORDS...'" in missing.output
    assert "store.task" not in missing.output
    run(repo, "task", "start", "debug", "flaky tests", "--plan", "reproduce", "--plan", "fix")
    assert run(repo, "task", "check", "reproduce", "--note", "fails after browser updates").output == \
        "Checked 'reproduce' (1 of 2 done)\n"
    assert run(repo, "task", "add", "write a test").output == "Added 'write a test' to the plan (1 of 3 done)\n"
    assert run(repo, "task", "drop", "write a test").output == "Dropped 'write a test' from the plan (1 of 2 done)\n"
    assert run(repo, "task", "round").output == "Round 1 of debug: flaky tests\n"
    early = run(repo, "task", "finish", "--force")
    assert early.exit_code == 1 and "give --problem and --solution" in early.output
    assert "task.problem" not in early.output
    done = run(repo, "task", "finish", "--problem", "tests fail at random", "--solution", "pinned the browser",
               "--force")  # ('fix' is not checked: without --force it is refused, see test_protocol)
    assert done.output.startswith("Closed ") and " as partial (commit " in done.output
    record = next((repo / "content" / "sessions").glob("*.md")).read_text()
    assert "## Plan\n\n- [x] reproduce — fails after browser updates\n- [ ] fix\n" in record


def test_trim_of_an_uncapped_category_is_one_clear_line(repo: Path) -> None:
    result = run(repo, "trim", "preferences")
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert "preferences has no capacity marks" in result.output and "mkdocs.yml" in result.output


def test_sync_without_a_remote_is_one_clear_line(repo: Path) -> None:
    result = run(repo, "sync")
    assert result.exit_code == 1 and result.output.count("\n") == 1 and "git remote add" in result.output


def test_help_says_where_the_default_agent_comes_from_and_shows_a_valid_id(repo: Path) -> None:
    from memsite.foundation.record import new_id

    assert "user.name as a slug" in " ".join(CliRunner().invoke(main, ["--help"]).output.split())
    short, example = [part.split()[0] for part in
                      CliRunner().invoke(main, ["show", "--help"]).output.split("memsite show ")[1:3]]
    assert len(example) == len(new_id()) and not set(example) & set("ILOU")  # Crockford's alphabet, as ids are
    assert short == example[-6:].lower()  # the short form, as lists show it
    with MemoryStore(repo, agent="x") as store:
        m = store.remember("Something to show", category="general")
    assert run(repo, "show", m.id).exit_code == 0


def test_diff_reads_plainly_in_a_terminal_and_shows_created_then_forgotten(repo: Path) -> None:
    base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    with MemoryStore(repo, agent="coder") as store:
        kept = store.remember("Use snake_case for file names", category="preferences")
        gone = store.remember("The build_server runs on host ci_7", category="entities")
        store.forget(gone.id, reason="the host was decommissioned")
        store.world.merge({"ci.last_run": "green"})
    text = run(repo, "diff", base, "--format", "text").output
    assert "Use snake_case for file names" in text and "\\_" not in text and "ci.last_run" in text
    assert "## Created then forgotten (1)" in text
    line = next(x for x in text.splitlines() if short_id(gone.id) in x)
    assert "The build_server runs on host ci_7" in line and "the host was decommissioned" in line
    shas = subprocess.run(["git", "log", "--format=%H", "-3"], cwd=repo, capture_output=True, text=True).stdout.split()
    assert f"removed in {shas[1][:10]}" in line and f"created in {shas[2][:10]}" in line  # forget, then its creation
    markdown = run(repo, "diff", base, "--format", "markdown").output  # for a PR or the job summary: escaped
    assert "snake\\_case" in markdown and "Created then forgotten" in markdown
    data = json.loads(run(repo, "diff", base, "--json").output)
    transient = [c for c in data["changes"] if c["action"] == "transient"]
    assert [c["id"] for c in transient] == [gone.id] and len(transient[0]["commits"]) == 2
    assert kept.id in {c["id"] for c in data["changes"] if c["action"] == "created"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_serve_prints_its_url_and_a_busy_port_is_one_line(repo: Path, tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        for args in (["-C", str(repo), "serve", "--port", str(port)],
                     ["demo", str(tmp_path / "demo"), "--serve", "--port", str(port)]):
            result = subprocess.run([sys.executable, "-m", "memsite", *args], capture_output=True, text=True,
                                    env=env(tmp_path), timeout=120)
            assert result.returncode == 1 and "Traceback" not in result.stderr
            assert result.stderr == f"Error: port {port} on 127.0.0.1 is already in use; choose another with " \
                                    f"--port (e.g. --port {port + 1})\n"
        assert not (tmp_path / "demo").exists()  # the demo checks the port before it writes anything

    made = json.loads(run(repo, "remember", "Deploys go through make release", "--json").output)
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "memsite", "-C", str(repo), "serve", "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(tmp_path))
    try:
        announced = server.stderr.readline()
        assert announced == f"Serving {repo} at http://127.0.0.1:{port}/ (Ctrl-C stops)\n"
        # Said once the port answers, not before the site is built: the address works at once.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as page:
            assert page.status == 200 and b"memsite-cards" in page.read()
        shown = run(repo, "show", made["short_id"], "--url")  # no site_url: the page being served
        assert shown.exit_code == 0 and shown.output == f"http://127.0.0.1:{port}/m/{made['id']}/\n"
        with urllib.request.urlopen(shown.output.strip(), timeout=30) as page:
            assert page.status == 200 and b"Deploys go through make release" in page.read()
    finally:
        server.terminate()
        server.wait(timeout=30)
    stopped = run(repo, "show", made["short_id"], "--url")
    assert stopped.exit_code == 1 and "has no site_url and no 'memsite serve' is running here" in stopped.output
