"""The memsite command, run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from memsite import MemoryStore
from memsite.api import storage_of
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
        (["show", "NOPE0000"], "no memory with id 'NOPE0000'"),
        (["forget", "NOPE0000"], "no memory with id 'NOPE0000'"),
        (["show", "01M8C"], "id '01M8C' is too short: give the whole id or at least its first 6 characters"),
        (["forget", "0"], "id '0' is too short"),
        (["world", "set", "a=1", "b"], "'b': expected KEY=VALUE"),
        (["world", "set", "a", "1", "2"], "expected KEY VALUE or KEY=VALUE pairs"),
        (["world", "set", "a=1", "a=2"], "'a': given twice"),
        (["task", "finish", "--world", "novalue"], "'novalue': expected KEY=VALUE"),
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


@pytest.mark.slow
def test_python_dash_m_and_the_console_script_agree(repo: Path) -> None:
    for number, command in enumerate(([sys.executable, "-m", "memsite"], ["memsite"])):
        text = ("The build server is called orion", "Deploys happen on Thursdays")[number]
        result = subprocess.run([*command, "-C", str(repo), "--agent", "proc", "remember", text],
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
    with MemoryStore(repo) as store:
        assert [m.agent for m in store.list()] == ["proc", "proc"]
    failed = subprocess.run([sys.executable, "-m", "memsite", "-C", str(repo), "show", "nope00"],
                            capture_output=True, text=True)
    assert failed.returncode == 1
    assert failed.stderr.strip() == "Error: no memory with id 'nope00'; 'memsite list' shows the ids"


# --- ids as people type them ------------------------------------------------------


@pytest.fixture
def fixed_ids(monkeypatch: pytest.MonkeyPatch):
    """Memories written from now on get these ids, in order (two share their first 10 characters)."""
    ids = iter(["01M8CFNYKZ0000000000000001", "01M8CFNYKZ1000000000000002", "01M8D00000000000000000000A"])
    monkeypatch.setattr("memsite.storage.memories.new_id", lambda: next(ids))


def test_an_id_is_found_by_its_first_characters_in_any_case(repo: Path, fixed_ids: None) -> None:
    for text in ("Deploys go through make release", "Deploys need a green CI", "The build server is orion"):
        assert run(repo, "remember", text).exit_code == 0
    shown = run(repo, "show", "01m8d0")
    assert shown.exit_code == 0, shown.output
    assert "id:        01M8D00000000000000000000A" in shown.output and "orion" in shown.output
    assert run(repo, "show", "01M8CFNYKZ1000000000000002".lower()).exit_code == 0  # a whole id in lower case
    gone = run(repo, "forget", "01M8CFNYKZ0", "-r", "superseded")
    assert gone.exit_code == 0, gone.output
    assert gone.output.startswith("Forgot 01M8CFNYKZ0000000000000001 (commit ")
    with MemoryStore(repo, agent="api") as store:  # the API (and the MCP tools on it) takes them too
        assert store.update("01m8cfnykz1000000000000002", pinned=True).pinned
        assert store.get("01M8CF").id == "01M8CFNYKZ1000000000000002"  # the other one is gone


def test_an_ambiguous_prefix_lists_the_candidates_and_writes_nothing(repo: Path, fixed_ids: None) -> None:
    run(repo, "remember", "Deploys go through make release")
    run(repo, "remember", "Deploys need a green CI\n\nAlways.")
    before = git(repo, "rev-parse", "HEAD")
    for command in (["show", "01M8CF"], ["forget", "01m8cfnykz"]):
        result = run(repo, *command)
        assert result.exit_code == 1 and len(result.output.splitlines()) == 1
        assert result.output == (
            f"Error: id {command[1]!r} is ambiguous: 2 memories have ids starting or ending with it: "
            "000001 01M8CFNYKZ0000000000000001 (Deploys go through make release); "
            "000002 01M8CFNYKZ1000000000000002 (Deploys need a green CI); give more of the id\n")
    assert git(repo, "rev-parse", "HEAD") == before


def test_short_ids_from_the_random_part_are_shown_and_taken_everywhere(repo: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Memories written minutes apart share their ids' first ten characters (the time): '01M8JQ' names seven of
    them. The short form is the end of the random part, as the file names end."""
    ids = iter(["01M8JQ0000AAAAAAAAAAWA8T29", "01M8JQ0001BBBBBBBBBBXQ4K7M", "01M8JQ0002CCCCCCCCCCZZ9999",
                "01M8JQ0003DDDDDDDDDDZZ9999"])
    monkeypatch.setattr("memsite.storage.memories.new_id", lambda: next(ids))
    for text in ("Deploys go through make release", "The build server is orion", "Staging is vega",
                 "Production is lyra"):
        assert run(repo, "remember", text, "-c", "entities").exit_code == 0
    listed = run(repo, "list").output.splitlines()
    assert [line.split()[0] for line in listed] == ["wa8t29", "xq4k7m", "zz9999", "zz9999"]
    assert sorted(p.name[-9:-3] for p in (repo / "content" / "memories").rglob("*.md")) == \
        ["wa8t29", "xq4k7m", "zz9999", "zz9999"]  # the file names end in it
    shown = run(repo, "show", "WA8T29")
    assert shown.exit_code == 0 and "id:        01M8JQ0000AAAAAAAAAAWA8T29 (short: wa8t29)" in shown.output
    assert run(repo, "recall", "build server").output.split()[1] == "xq4k7m"
    assert json.loads(run(repo, "list", "--json").output)[0]["short_id"] == "wa8t29"
    for text, many in (("01M8JQ", 4), ("zz9999", 2)):
        ambiguous = run(repo, "show", text)
        assert ambiguous.exit_code == 1 and f"is ambiguous: {many} memories" in ambiguous.output
        assert "zz9999 01M8JQ0002CCCCCCCCCCZZ9999 (Staging is vega)" in ambiguous.output
    with MemoryStore(repo, agent="api") as store:  # the API, and the MCP tools and LangGraph store on it
        assert store.get("xq4k7m").abstract == "The build server is orion"
        assert store.update("wa8t29", pinned=True).pinned
        assert "id wa8t29)" in store.call_tool("retrieve_from_memory", {"keywords": ["make", "release"]})
        store.forget("dddzz9999", reason="lyra is retired")
        assert store.get("zz9999").id == "01M8JQ0002CCCCCCCCCCZZ9999"  # one left that ends so
        assert store.get("01M8JQ0001BBBBBBBBBBXQ4K7M").id.endswith("XQ4K7M")  # whole ids keep working
    gone = run(repo, "show", "dddzz9999")
    assert "was forgotten on" in gone.output and "reason: lyra is retired" in gone.output


def test_finding_an_id_prefix_reads_the_id_index_not_every_memory(repo: Path, fixed_ids: None) -> None:
    run(repo, "remember", "Deploys go through make release")
    with MemoryStore(repo) as store:
        store.get(store.list()[0].id)  # (the catalog is up to date: what follows is the lookup alone)
        statements: list[str] = []
        storage_of(store).catalog.db.set_trace_callback(statements.append)
        assert store.get("01m8cfnykz").id == "01M8CFNYKZ0000000000000001"
        storage_of(store).catalog.db.set_trace_callback(None)
        plans = [row[-1] for sql in statements if sql.lstrip().upper().startswith("SELECT")
                 for row in storage_of(store).catalog.db.execute(f"EXPLAIN QUERY PLAN {sql}")]
    assert any("memories_id_nocase" in plan for plan in plans), plans
    assert not [plan for plan in plans if plan.startswith("SCAN m") or plan == "SCAN memories"], plans


def test_an_id_forgotten_already_says_when_by_whom_and_in_which_commit(repo: Path, fixed_ids: None) -> None:
    run(repo, "remember", "Deploys go through make release")
    run(repo, "remember", "Unrelated afterwards", agent="other")
    assert run(repo, "forget", "01M8CFNYKZ0000000000000001", "-r", "moved to the wiki", agent="cleaner").exit_code == 0
    sha, stamp = git(repo, "log", "-1", "--format=%H %at").split()
    when = datetime.fromtimestamp(int(stamp), UTC)
    run(repo, "remember", "Written after the forget")
    before = git(repo, "rev-parse", "HEAD")
    for command in (["forget", "01M8CFNYKZ0000000000000001"], ["show", "01m8cfnykz0000000000000001"]):
        result = run(repo, *command)
        assert result.exit_code == 1
        assert result.output == (f"Error: no memory with id {command[1]!r}: "
                                 f"{'it' if command[0] == 'forget' else '01M8CFNYKZ0000000000000001'} was forgotten "
                                 f"on {when:%Y-%m-%d %H:%M} UTC by cleaner (commit {sha[:12]}; "
                                 "reason: moved to the wiki)\n")
    prefix = run(repo, "show", "01m8cfnykz0")  # only the forgotten one starts so
    assert "01M8CFNYKZ0000000000000001 was forgotten on" in prefix.output
    assert git(repo, "rev-parse", "HEAD") == before


# --- options where people put them ------------------------------------------------


def test_the_group_options_also_follow_the_command(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # not in the repository: -C after the command must find it
    made = CliRunner().invoke(main, ["remember", "Deploys go through make release", "-C", str(repo), "--agent", "late"])
    assert made.exit_code == 0, made.output
    assert git(repo, "log", "-1", "--format=%an").strip() == "late"
    set_by_w = CliRunner().invoke(main, ["world", "set", "ci.status", "green", "--agent", "w", "-C", str(repo)])
    assert set_by_w.exit_code == 0
    assert git(repo, "log", "-1", "--format=%an").strip() == "w"
    assert CliRunner().invoke(main, ["world", "-C", str(repo), "show"]).output == "ci.status: green\n"
    after = CliRunner().invoke(main, ["--agent", "early", "-C", str(repo), "remember", "Builds run on orion",
                                      "--agent", "later"])
    assert after.exit_code == 0 and git(repo, "log", "-1", "--format=%an").strip() == "later"  # the last one given
    # --agent means who writes wherever it is given; list filters by author with --by, as recall does.
    listed = CliRunner().invoke(main, ["-C", str(repo), "--agent", "late", "list", "--by", "later"])
    assert "Builds run on orion" in listed.output and "make release" not in listed.output
    unfiltered = CliRunner().invoke(main, ["-C", str(repo), "list", "--agent", "later"])
    assert "Builds run on orion" in unfiltered.output and "make release" in unfiltered.output
    version = CliRunner().invoke(main, ["list", "--version"])
    assert version.exit_code == 0 and version.output == CliRunner().invoke(main, ["--version"]).output


def test_debug_after_the_command_shows_the_traceback(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(MemoryStore, "list", broken)
    quiet = run(repo, "list")
    assert quiet.exit_code == 1 and "unexpected RuntimeError: boom; rerun with --debug" in quiet.output
    loud = run(repo, "list", "--debug")
    assert isinstance(loud.exception, RuntimeError)


@pytest.mark.slow
def test_world_set_takes_key_value_pairs_or_a_key_and_a_value(repo: Path) -> None:
    pairs = run(repo, "world", "set", "deploy.target=staging", "ci.url=https://ci.example/?a=b")
    assert pairs.exit_code == 0 and pairs.output.startswith("Set deploy.target, ci.url (commit ")
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "2"  # one commit for both
    assert run(repo, "world", "set", "note", "x=y").exit_code == 0  # KEY VALUE: the value may hold '='
    assert run(repo, "world", "set", "empty=").exit_code == 0
    with MemoryStore(repo) as store:
        assert store.world.read() == {"ci.url": "https://ci.example/?a=b", "deploy.target": "staging",
                                      "empty": "", "note": "x=y"}
    assert run(repo, "world", "set", "note=x=y").output == "note already had that value\n"


@pytest.mark.slow
def test_an_agent_name_with_spaces_writes_as_its_slug(repo: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "memsite", "-C", str(repo), "--agent", "Team Lead", "remember",
                             "Hello"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "writing as team-lead\n"
    assert git(repo, "log", "-1", "--format=%an").strip() == "team-lead"
    same = subprocess.run([sys.executable, "-m", "memsite", "-C", str(repo), "--agent", "team-lead", "remember",
                           "Bye"], capture_output=True, text=True)
    assert same.returncode == 0 and same.stderr == ""  # a name that is one already is said nothing about
    for path in ("agent/planner", "..\\up"):
        refused = run(repo, "remember", "x", agent=path)
        assert refused.exit_code == 1 and f"agent {path!r}: use 1-64 letters" in refused.output


# --- standard input, read no further than the cap ---------------------------------


def _pipe(command: list[str], size: int) -> tuple[subprocess.CompletedProcess[bytes], int]:
    """Run ``command`` with ``size`` bytes offered on its standard input; returns it and how many it took."""
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    sent, chunk = 0, b"x" * (1 << 20)
    try:
        while sent < size:
            proc.stdin.write(chunk)
            sent += len(chunk)
        proc.stdin.close()
    except BrokenPipeError:  # it stopped reading and exited
        pass
    out, err = proc.communicate()
    return subprocess.CompletedProcess(command, proc.returncode, out, err), sent


@pytest.mark.parametrize(("command", "setting"), [
    (["remember", "-"], "max_memory_bytes: 2000"),
    (["world", "set", "notes", "-"], "max_world_bytes: 2000"),
])
def test_standard_input_over_the_cap_is_refused_unread(repo: Path, command: list[str], setting: str) -> None:
    key = setting.split(":")[0]
    settings = repo / "mkdocs.yml"
    settings.write_text(settings.read_text().replace("  memsite:\n", f"  memsite:\n    {setting}\n", 1)
                        .replace("    max_memory_bytes: 65536\n", "" if key == "max_memory_bytes" else
                                 "    max_memory_bytes: 65536\n"))
    git(repo, "commit", "-qam", "small caps")
    before = git(repo, "rev-parse", "HEAD")
    result, sent = _pipe([sys.executable, "-m", "memsite", "-C", str(repo), *command], 256 << 20)
    assert result.returncode == 1
    assert result.stderr.decode() == (f"Error: standard input: more than 2000 bytes, over the 2000-byte cap "
                                      f"(plugins.memsite.{key}); "
                                      + ("split it into smaller memories" if "remember" in command
                                         else "keep large text in a memory and refer to it") + "\n")
    assert sent < 64 << 20  # it stopped reading long before the end
    assert git(repo, "rev-parse", "HEAD") == before
    fits = CliRunner().invoke(main, ["-C", str(repo), *command], input="y" * 1500)
    assert fits.exit_code == 0, fits.output


def test_a_conversation_to_ingest_over_the_limit_is_refused_unread(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("memsite.features.ingest.MAX_CONVERSATION_BYTES", 1000)
    conversation = json.dumps([{"role": "user", "content": "x" * 2000}])
    piped = run(repo, "ingest", "-", input=conversation)
    assert piped.exit_code == 1
    assert piped.output == "Error: standard input: more than 1000 bytes, over the 1000-byte limit; ingest it in parts\n"
    (repo.parent / "chat.json").write_text(conversation)
    filed = run(repo, "ingest", str(repo.parent / "chat.json"))
    assert filed.output == (f"Error: {repo.parent / 'chat.json'}: more than 1000 bytes, over the 1000-byte limit; "
                            "ingest it in parts\n")


def test_list_filtered_to_nothing_does_not_say_the_memory_is_empty(repo: Path) -> None:
    run(repo, "remember", "Deploys go through make release", "-c", "patterns")
    nobody = CliRunner().invoke(main, ["-C", str(repo), "list", "--by", "nobody"])
    assert nobody.exit_code == 0
    assert nobody.output == "No memories by agent nobody; the repository has 1 ('memsite list' shows them all).\n"
    both = CliRunner().invoke(main, ["-C", str(repo), "list", "-c", "cases", "--by", "nobody"])
    assert "No memories in category cases and by agent nobody; the repository has 1" in both.output


def test_binary_input_is_named_as_binary_not_as_a_surrogate(repo: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
    before = git(repo, "rev-parse", "HEAD")
    for args in (["remember", "-"], ["world", "set", "logo", "-"]):
        result = CliRunner().invoke(main, ["-C", str(repo), *args], input=png)
        assert result.exit_code == 1 and "surrogate" not in result.output
        assert result.output.endswith(": not UTF-8 text (byte 0x89 at byte 0, line 1): binary data (an image, an "
                                      "archive?) cannot be remembered; send UTF-8 text\n")
    assert git(repo, "rev-parse", "HEAD") == before


def test_sync_integrate_and_propose_run_from_the_command_line(repo: Path, tmp_path: Path) -> None:
    """The sharing commands reach the remote through the facade (they once handed the library's features a
    MemoryStore, which has no repository of its own: AttributeError)."""
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    assert run(repo, "remember", "The staging cluster is vega", "-c", "entities").exit_code == 0
    synced = run(repo, "sync")
    assert synced.exit_code == 0, synced.output
    assert synced.output.startswith("Synced with origin/main")
    mine = git(repo, "rev-parse", "main").strip()
    assert git(bare, "rev-parse", "main").strip() == mine
    assert git(bare, "rev-parse", "agent/cli-agent").strip() == mine
    integrated = run(repo, "integrate", "--json")
    assert integrated.exit_code == 0, integrated.output
    assert json.loads(integrated.output)["merged"] == []
    proposed = run(repo, "propose")
    assert proposed.exit_code == 1 and "nothing to propose" in proposed.output
    assert "AttributeError" not in synced.output + integrated.output + proposed.output
