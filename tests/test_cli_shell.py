"""The CLI is a thin shell over the facade: the rules ``memsite/cli/__init__.py`` states, each checked.

- a command computes nothing the facade does not offer (read from the source: what it imports from below it);
- every command's errors are handled in one place, the group (read from the source, and run: every command
  given bad input says one line and exits 1);
- an option that means the same on every command is declared once, and ``--agent`` always says who writes
  (``--by`` filters by writer).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from memsite import MemoryStore
from memsite.cli import main

from .conftest import Clock, git

CLI = Path(__file__).resolve().parent.parent / "memsite" / "cli"
BELOW_THE_FACADE = ("memsite.foundation", "memsite.git", "memsite.storage", "memsite.features")
# What a command may take from below the facade: it formats, reads its own input, or shows a constant in an
# option. Anything else (a computation) belongs behind MemoryStore, so the API offers what the CLI shows.
HELPERS = {
    "memsite.foundation.terminal": {"safe", "json_text", "json_safe"},  # text safe for a terminal, exact JSON
    "memsite.foundation.record": {"Memory", "short_id", "format_time"},  # a memory's short id, a time as shown
    "memsite.foundation.fileformat": {"memory_fields"},  # a memory's fields, as --json prints them
    "memsite.foundation.config": {"memory_url", "site_url", "ENGINES"},  # a page's address; --engine's choices
    "memsite.foundation.errors": {"MemsiteError"},  # the public exception tree
    "memsite.foundation.inputs": {"read_capped"},  # the command's own input, read no further than its cap
    "memsite.foundation.text": {"only_stopwords"},  # which 'nothing matched' message to print
    "memsite.features.review": {"markdown"},  # a Diff as Markdown
    "memsite.features.history": {"render_day"},  # a DayReport as Markdown
    "memsite.features.protocol": {"reworded"},  # a protocol error in the words of the shell
    "memsite.features.purge": {"MATCHING_WITHOUT_YES"},  # the number --yes's help names
    "memsite.features.ingest": {"MAX_CONVERSATION_BYTES"},  # the cap on the file ingest reads
}


def modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(CLI.glob("*.py")):
        yield path.name, ast.parse(path.read_text(encoding="utf-8"))


def imported(tree: ast.Module) -> Iterator[tuple[str, str]]:
    """(module, name) of each import in a module of memsite/cli/, its functions' own imports too."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = "memsite" if node.level == 2 else "memsite.cli" if node.level == 1 else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            for alias in node.names:
                yield module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ""


def commands(group: click.Group = main, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from commands(command, (*prefix, name))
        else:
            yield " ".join((*prefix, name)), command


# --- a command computes nothing the facade does not offer -------------------------------------------------


def test_no_command_imports_below_the_facade_but_formatting_and_input_helpers() -> None:
    below = sorted(f"{name}: {module}.{what}" for name, tree in modules() for module, what in imported(tree)
                   if module.startswith(BELOW_THE_FACADE) and what not in HELPERS.get(module, set()))
    assert below == []


def test_what_check_diff_and_report_print_is_what_the_facade_returns(tmp_path: Path) -> None:
    repo = tmp_path / "memory"
    assert CliRunner().invoke(main, ["init", str(repo)]).exit_code == 0
    with MemoryStore(repo, agent="planner") as store:
        first = store.remember("Deploys go through make release", category="patterns")
        store.remember("The user prefers tabs", category="preferences")
        reports = [r.as_dict() for r in store.reports()]
        diff = store.diff("HEAD~2")
        abstract = store.get(first.id).abstract
    (repo / "content" / "memories" / "stray.md").write_text("x")
    checked = MemoryStore.check(repo)  # a store need not open: a repository it cannot open is checked too
    cli = CliRunner()
    assert json.loads(cli.invoke(main, ["-C", str(repo), "report", "--json"]).output) == reports
    assert reports[0]["counts"]["created"] == 2
    assert cli.invoke(main, ["-C", str(repo), "report"]).output.count(abstract) == 1  # a highlight, by its abstract
    assert json.loads(cli.invoke(main, ["-C", str(repo), "diff", "HEAD~2", "--json"]).output) == \
        json.loads(diff.to_json())
    assert diff.count("created") == 2
    result = cli.invoke(main, ["-C", str(repo), "check"])
    assert result.exit_code == 1
    assert checked.problems and result.stdout.splitlines() == checked.problems


def test_check_needs_no_store_that_opens(tmp_path: Path) -> None:
    repo = tmp_path / "memory"
    assert CliRunner().invoke(main, ["init", str(repo)]).exit_code == 0
    settings = repo / "mkdocs.yml"
    settings.write_text(settings.read_text() + "foo: !!python/object/apply:os.system ['true']\n")
    checked = MemoryStore.check(repo)
    assert any("python tags (!!python/object/apply) are refused" in line for line in checked.problems)


def test_sync_integrate_and_propose_reach_the_remote_through_the_facade(tmp_path: Path) -> None:
    """They called the features with a MemoryStore, which has no storage of its own to hand them."""
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    repo = tmp_path / "memory"
    assert CliRunner().invoke(main, ["init", str(repo), "--remote", str(bare)]).exit_code == 0
    cli = CliRunner()
    assert cli.invoke(main, ["-C", str(repo), "remember", "Builds run on orion"]).exit_code == 0
    synced = cli.invoke(main, ["-C", str(repo), "sync", "--json"])
    assert synced.exit_code == 0, synced.output
    assert json.loads(synced.output)["pushed"] >= 1
    assert git(bare, "log", "-1", "--format=%s", "main").strip() == git(repo, "log", "-1", "--format=%s").strip()
    integrated = cli.invoke(main, ["-C", str(repo), "integrate"])
    assert integrated.exit_code == 0 and integrated.output.startswith("Nothing to integrate"), integrated.output
    assert cli.invoke(main, ["-C", str(repo), "--agent", "coder", "remember", "Tabs, not spaces"]).exit_code == 0
    proposed = cli.invoke(main, ["-C", str(repo), "--agent", "coder", "propose"])
    assert proposed.exit_code == 0, proposed.output
    assert "Tabs, not spaces" in proposed.stdout
    assert git(bare, "log", "-1", "--format=%s", "review/coder").strip()


# --- every command's errors are handled in one place -----------------------------------------------------


def test_only_the_group_turns_a_memsite_error_into_a_message() -> None:
    """No decorator or handler of a command's own: a command added tomorrow gets the same one line."""
    elsewhere = []
    for name, tree in modules():
        owners = {id(node): cls.name for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef)
                  for node in ast.walk(cls)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ExceptHandler) and "MemsiteError" in ast.unparse(node.type or ast.Pass()):
                raises = any(isinstance(n, ast.Raise) and "ClickException" in ast.unparse(n) for n in ast.walk(node))
                if raises and owners.get(id(node)) != "MemsiteGroup":
                    elsewhere.append(f"{name}:{node.lineno}")
    assert elsewhere == []


# Each command with input it refuses; a folder that is no memory repository (NOWHERE) where any input would do.
NOWHERE = "<nowhere>"
BAD_INPUT = {
    "init": ("REPO", "init", "REPO"),
    "clone": ("REPO", "clone", "TMP/no-such-remote", "TMP/clone"),
    "remember": ("REPO", "remember", " "),
    "supersede": ("REPO", "supersede", "zzzzzzz", "yyyyyyy"),
    "dismiss": ("REPO", "dismiss", "zzzzzzz"),
    "show": ("REPO", "show", "zzzzzzz"),
    "list": ("REPO", "list", "-c", "no-such-category"),
    "forget": ("REPO", "forget", "zz"),
    "purge": ("REPO", "purge", "zzzzzzz", "-r", "why"),
    "trim": ("REPO", "trim", "no-such-category"),
    "migrate": (NOWHERE, "migrate"),
    "diff": ("REPO", "diff", "no-such-revision"),
    "report": (NOWHERE, "report"),
    "recall": ("REPO", "recall", "x", "--since", "tomorrow"),
    "rank": ("REPO", "rank", "-c", "no-such-category"),
    "flush": (NOWHERE, "flush"),
    "index rebuild": (NOWHERE, "index", "rebuild"),
    "index embed": (NOWHERE, "index", "embed"),
    "core": ("REPO", "core", "--as-of", "1990-01-01"),
    "world show": (NOWHERE, "world", "show"),
    "world set": ("REPO", "world", "set", "bad key", "x"),
    "world unset": (NOWHERE, "world", "unset", "k"),
    "task start": ("REPO", "task", "start", " "),
    "task show": ("REPO", "task", "show"),
    "task check": ("REPO", "task", "check", "x"),
    "task add": ("REPO", "task", "add", "x"),
    "task drop": ("REPO", "task", "drop", "x"),
    "task round": ("REPO", "task", "round"),
    "task finish": ("REPO", "task", "finish"),
    "task abandon": ("REPO", "task", "abandon", "why"),
    "ingest": ("REPO", "ingest", "TMP/no-such.json"),
    "resume": ("REPO", "resume", "no-such-key"),
    "skills": (NOWHERE, "skills"),
    "build": (NOWHERE, "build"),
    "serve": (NOWHERE, "serve"),
    "project": (NOWHERE, "project", "-o", "TMP/out"),
    "demo": ("REPO", "demo", "REPO/mkdocs.yml/demo"),
    "sync": ("REPO", "sync"),
    "integrate": ("REPO", "integrate"),
    "propose": ("REPO", "propose"),
    "doctor": (NOWHERE, "doctor"),
    "mcp": (NOWHERE, "mcp"),
}
# Commands whose exit status 1 is their answer rather than an error: check lists problems one a line
# (tests/test_cli.py), and git reads merge-driver's as "conflict markers written".
ANSWERS = {"check", "merge-driver"}


def test_every_command_is_given_bad_input_here() -> None:
    assert sorted(BAD_INPUT) == sorted(name for name, _ in commands() if name not in ANSWERS)


@pytest.mark.parametrize("name", sorted(BAD_INPUT))
def test_every_command_says_a_memsite_error_in_one_line_with_exit_status_1(name: str, tmp_path: Path) -> None:
    repo, nowhere = tmp_path / "memory", tmp_path / "nowhere"
    nowhere.mkdir()
    assert CliRunner().invoke(main, ["init", str(repo)]).exit_code == 0
    where, *args = (arg.replace("REPO", str(repo)).replace("TMP", str(tmp_path)) for arg in BAD_INPUT[name])
    result = CliRunner().invoke(main, ["-C", str(nowhere) if where == NOWHERE else where, *args])
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and result.output.endswith(errors[0] + "\n"), result.output
    assert "unexpected" not in errors[0] and "Traceback" not in result.output, result.output


# --- options that mean the same are declared once -----------------------------------------------------------


def test_shared_options_are_declared_once() -> None:
    declared = {flag: sorted(name for name, tree in modules() for node in ast.walk(tree)
                             if isinstance(node, ast.Constant) and node.value == flag)
                for flag in ("--json", "--by", "--as-of")}
    assert declared == {flag: ["common.py"] for flag in declared}


def test_every_json_option_is_the_same_flag() -> None:
    flags = {name: next(p for p in command.params if p.name == "as_json") for name, command in commands()
             if any(p.name == "as_json" for p in command.params)}
    printing = {"list", "recall", "rank", "show", "remember", "diff", "report", "sync", "integrate", "world show"}
    assert printing <= set(flags)
    assert all(p.opts == ["--json"] and p.is_flag and p.help.startswith("Print ") for p in flags.values())


def test_agent_says_who_writes_everywhere_and_by_filters_by_writer() -> None:
    """``list --agent`` filtered by writer while ``--agent`` elsewhere says who writes; now --by, as recall."""
    for name, command in commands():
        own = [p for p in command.params if p.expose_value and "--agent" in p.opts]
        assert all(p.name == "agent" for p in own), name  # (mcp's own --agent: who writes, for the server)
        filters = [p for p in command.params if p.name == "by_agent"]
        assert all(p.opts == ["--by"] for p in filters), name
    by = {name for name, command in commands() if any(p.name == "by_agent" for p in command.params)}
    assert by == {"list", "recall"}


def test_list_filters_by_writer_with_by(tmp_path: Path) -> None:
    repo = tmp_path / "memory"
    cli = CliRunner()
    assert cli.invoke(main, ["init", str(repo)]).exit_code == 0
    assert cli.invoke(main, ["-C", str(repo), "--agent", "planner", "remember", "Deploys go through make release"]
                      ).exit_code == 0
    assert cli.invoke(main, ["-C", str(repo), "--agent", "coder", "remember", "Builds run on orion"]).exit_code == 0
    listed = cli.invoke(main, ["-C", str(repo), "list", "--by", "coder", "--json"])
    assert [m["abstract"] for m in json.loads(listed.output)] == ["Builds run on orion"]


def test_show_as_of_prints_the_chain_the_facade_returns(store: MemoryStore, clock: Clock) -> None:
    """``memsite show ID --as-of WHEN`` walked the chain itself; now ``store.chain(id, as_of=)`` does."""
    paris = store.remember("The user lives in Paris.", category="profile")
    clock.advance(days=4)
    berlin = store.remember("The user lives in Berlin.", category="profile", supersedes=paris.id)
    clock.advance(days=4)
    store.remember("The user lives in Rome.", category="profile", supersedes=berlin.id)
    then = (clock.now - timedelta(days=2)).isoformat()  # after Berlin, before Rome
    chained = store.chain(berlin.id, as_of=then)
    assert [m.abstract for m in chained] == ["The user lives in Paris.", "The user lives in Berlin."]
    assert chained[-1].superseded_by is None  # as the repository held it then: not replaced yet
    assert [m.abstract for m in store.chain(berlin.id)][-1] == "The user lives in Rome."
    shown = CliRunner().invoke(main, ["-C", str(store.root), "show", berlin.id, "--as-of", then])
    assert shown.exit_code == 0, shown.output
    chain_lines = shown.output.split("Chain, oldest to newest:\n")[1].splitlines()
    assert len(chain_lines) == 2 and all(m.abstract in line for m, line in zip(chained, chain_lines))
    assert "Rome" not in shown.output


def test_a_base_that_names_no_commit_is_one_problem(tmp_path: Path) -> None:
    repo = tmp_path / "memory"
    assert CliRunner().invoke(main, ["init", str(repo)]).exit_code == 0
    checked = CliRunner().invoke(main, ["-C", str(repo), "check", "--base", "no-such-revision"])
    assert checked.exit_code == 1
    assert checked.stdout == f"'no-such-revision' is not a commit in {repo}; fetch it or name another\n"
    assert MemoryStore.check(repo, base="no-such-revision").problems == [checked.stdout.strip()]
