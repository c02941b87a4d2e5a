"""The README and the docs are part of the product: examples run, commands are the real ones, the site builds."""

from __future__ import annotations

import ast
import io
import json
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path
from typing import Any

import pytest

from memsite import MemoryStore
from memsite.cli import main
from memsite.foundation.config import DEFAULT_CATEGORIES
from tests.test_llm import Endpoint, chat

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
AGENTS = (DOCS / "guides" / "agents.md").read_text()


def blocks(language: str, text: str = README) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def git_log(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "log", *args], capture_output=True, text=True).stdout


def test_the_readme_stays_short() -> None:
    assert len(README.splitlines()) <= 200


def test_the_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (example,) = blocks("python")
    exec(compile(example, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.startswith("created preferences ")
    assert "User prefers tabs over spaces in Python files." in out.split("# World state")[0]  # recalled
    assert "- deploy.target: staging" in out
    log = git_log(tmp_path / "agent-memory", "--format=%an %s")
    assert "planner Task debug: indentation (succeeded)" in log
    assert "planner Remember preferences: User prefers tabs over spaces in Python files." in log
    exec(compile(example, "README.md", "exec"), {})  # run again, as people do: the memory is opened, not refused
    assert capsys.readouterr().out.startswith("skipped preferences ")  # (already remembered)


@pytest.mark.slow
def test_the_langgraph_example_runs_on_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Copied alone into an empty folder, as a reader trying LangGraph would."""
    pytest.importorskip("langgraph")
    monkeypatch.chdir(tmp_path)
    (example,) = [block for block in blocks("python", AGENTS) if "StateGraph" in block]
    exec(compile(example, "docs/guides/agents.md", "exec"), {})
    assert capsys.readouterr().out == "I prefer answers in French\n"


def test_the_readme_lists_the_categories_memsite_init_writes() -> None:
    rows = re.findall(r"^\| `(\w+)` \| (.+?) \| (.*) \|$", README, re.M)
    assert [(name, what, re.findall(r"`(\w+)`", aliases)) for name, what, aliases in rows] == [
        (c.name, c.description, list(c.aliases)) for c in DEFAULT_CATEGORIES]
    layout = (DOCS / "reference" / "repository.md").read_text()
    assert all(f"| `{c.name}` | {c.description} |" in layout for c in DEFAULT_CATEGORIES)


def test_the_readme_links_lead_to_docs_pages() -> None:
    links = re.findall(r"\]\((?!https?:)([^)#]+)", README)
    assert "docs/guides/agents.md" in links and "docs/reference/api.md" in links
    assert [link for link in links if not (ROOT / link).is_file()] == []


def test_the_agents_guide_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    api, extraction, *integrations = blocks("python", AGENTS)
    for block in integrations:  # they need an LLM or an agent framework: compiled, not run
        compile(block, "docs/guides/agents.md", "exec")
    ran: dict[str, Any] = {}
    exec(compile(api, "docs/guides/agents.md", "exec"), ran)
    log = git_log(tmp_path / "agent-memory", "--format=%an %s")
    assert "planner Import notes from session 12" in log
    assert "planner Forget preferences:" in log
    # what its comments promise it prints
    out = capsys.readouterr().out.splitlines()
    m = ran["m"]
    assert out[0] == f"created {m.id} {m.path} {m.commit}"
    assert m.path.relative_to(tmp_path / "agent-memory").as_posix().startswith("content/memories/preferences/")
    assert out[1] == "['User prefers tabs over spaces in Python files.']"
    assert out[2] == ran["tx"].commit
    assert out[3] == "{'db.version': '15', 'deploy.target': 'staging'}"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d_debug_undefined_var_add", out[4])
    core = out[out.index("# World state"):]
    assert "- ci.status: green" in core and "- The CI runner has 4 cores." in core
    retrieved = out.index("Relevant memories (best first):")  # "release day": the release memory, and no other
    assert out[retrieved + 1].startswith("- [events] Release 1.4 shipped without a rollback.")
    assert out[retrieved + 2] == "Memories matching tabs:"
    assert out[retrieved + 3].startswith("- [preferences] User prefers tabs over spaces in Python files.")
    assert out[-1] == "Migration(memories=0, archived=0, commit=None)"
    with MemoryStore(tmp_path / "agent-memory", agent="reader") as store:  # forgotten: no longer listed
        assert sorted(x.abstract for x in store.list()) == ["Release 1.4 shipped without a rollback.",
                                                            "The CI runner has 4 cores.",
                                                            "undefined variable -> define it before first use"]

    server = Endpoint(chat(json.dumps([{"content": "Staging is the vega cluster.", "category": "entities"}])))
    server.start()
    ran = {}
    exec(compile(extraction.replace("http://127.0.0.1:8080/v1", server.base_url), "docs/guides/agents.md", "exec"),
         ran)
    server.stop()
    assert "Ingest-Batch: run-42 0-1" in git_log(tmp_path / "agent-memory", "-1", "--format=%B")
    assert len(server.requests) == 1
    assert ran["stats"]["created"] == 1
    with MemoryStore(tmp_path / "agent-memory", agent="reader") as store:
        assert sorted(x.abstract for x in store.list(category="entities")) == ["Staging is the vega cluster.",
                                                                               "The CI runner has 4 cores."]


def test_every_python_example_of_the_docs_compiles() -> None:
    for page in sorted(DOCS.rglob("*.md")):
        for block in blocks("python", page.read_text()):
            compile(block, str(page), "exec")


@pytest.mark.slow
def test_the_quick_start_builds_the_demo_site(tmp_path: Path) -> None:
    first = blocks("bash")[0].strip()
    install, _, rest = first.partition(" && ")
    assert install == "pip install -e ."
    assert rest.endswith(" --serve")  # serving blocks: the test builds and checks instead
    command = rest.removesuffix(" --serve").replace("/tmp/memsite-demo", str(tmp_path / "demo"))
    result = subprocess.run(command, shell=True, capture_output=True, text=True, env=os.environ)
    assert result.returncode == 0, result.stderr
    assert f"Site built into: {tmp_path / 'demo' / 'site'}" in result.stdout
    # What it prints to read the site serves it (the built files need a web server: folder URLs, search worker)
    assert f"To read it: memsite -C {tmp_path / 'demo'} serve --port 8000" in result.stdout
    assert "file://" not in result.stdout and "index.html" not in result.stdout
    assert (tmp_path / "demo" / "site" / "skills" / "index.html").is_file()


@pytest.mark.slow
def test_the_own_memory_command_works(tmp_path: Path) -> None:
    command = blocks("bash")[2].strip().replace("/tmp/my-memory", str(tmp_path / "my-memory"))
    result = subprocess.run(command, shell=True, capture_output=True, text=True, env=os.environ)
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "my-memory" / "site" / "memories" / "preferences" / "index.html").read_text()
    assert "User prefers tabs over spaces" in page


def test_ci_runs_exactly_the_readme_test_command() -> None:
    test_command = blocks("bash")[1].strip()
    assert "pytest" in test_command
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == test_command
    assert os.access(ROOT / ".ci" / "run", os.X_OK)


def test_the_command_reference_lists_every_command() -> None:
    documented = set(re.findall(r"^\| `memsite ([\w-]+)", (DOCS / "reference" / "cli.md").read_text(), re.M))
    assert documented == set(main.commands)


@pytest.mark.slow
def test_the_docs_site_builds_strict(tmp_path: Path) -> None:
    """`mkdocs build --strict`: a broken link or anchor, a bad docstring or a page left out of the nav fails it."""
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", "mkdocs.docs.yml",
                             "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    for name in ("memsite.MemoryStore.remember", "memsite.MemoryStore.recall", "memsite.MemoryStore.task",
                 "memsite.MemsiteError"):
        assert f'id="{name}"' in api  # generated from the docstrings
    assert "<table>" in (tmp_path / "site" / "benchmarks" / "index.html").read_text()
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert all(f"Usage: memsite {name} " in cli for name in main.commands)  # each command's --help, generated
    assert "Usage: memsite task finish " in cli and not (tmp_path / "site" / "hooks").exists()


BENCH_SCRIPT = '''
import sys
from pathlib import Path
sys.path.insert(0, {bench!r})
import report

print("demo benchmark: 3 runs")
print("| measure | memsite | baseline |")
print("|---|---|---|")
print("| remember() p50 | 2.5 ms | 30 ms |")
print("{{:<10}}  {{:>5}}".format("aligned", 1))
print("progress on stderr", file=sys.stderr)
report.publish("demo", skip="--quick" in sys.argv, page=Path({page!r}))
'''


def test_a_bench_run_rewrites_its_own_section_of_the_benchmarks_page(tmp_path: Path) -> None:
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\n## Demo\n\nWhat it measures.\n\n<!-- bench:demo -->\nold figures\n"
                    "<!-- /bench:demo -->\n\n## Other\n\n<!-- bench:other -->\nkept\n<!-- /bench:other -->\n")
    script = tmp_path / "demo.py"
    script.write_text(BENCH_SCRIPT.format(bench=str(ROOT / "bench"), page=str(page)))
    before = page.read_text()
    quick = subprocess.run([sys.executable, str(script), "--quick"], capture_output=True, text=True)
    assert quick.returncode == 0, quick.stderr
    assert "| remember() p50 | 2.5 ms | 30 ms |" in quick.stdout  # printed as before
    assert page.read_text() == before  # a smoke run leaves the figures alone

    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    text = page.read_text()
    assert "old figures" not in text
    demo = text.split("<!-- bench:demo -->\n")[1].split("<!-- /bench:demo -->")[0]
    assert demo.startswith("*Last run ") and "`python bench/demo.py`" in demo
    assert ("demo benchmark: 3 runs\n\n| measure | memsite | baseline |\n|---|---|---|\n"
            "| remember() p50 | 2.5 ms | 30 ms |\n\n```text\naligned         1\n```") in demo
    assert "progress on stderr" not in text
    assert text.startswith("# Benchmarks\n\n## Demo\n\nWhat it measures.\n\n")
    assert "<!-- bench:other -->\nkept\n<!-- /bench:other -->" in text

    again = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert again.returncode == 0 and page.read_text().count("<!-- bench:demo -->") == 1


def test_every_bench_script_has_its_section_on_the_benchmarks_page() -> None:
    page = (DOCS / "benchmarks.md").read_text()
    published = {name for f in (ROOT / "bench").glob("*.py")
                 for call in re.findall(r"report\.publish\(((?:[^()]|\([^()]*\))*)\)", f.read_text())
                 for name in re.findall(r'"([\w-]+)"', call.split("skip=")[0])}
    assert published == {"commit", "commit-import", "commit-large", "commit-month", "dulwich-trial", "faults",
                         "fresh-clone", "langgraph-store", "longterm", "mcp-server", "memory-tool", "quality",
                         "purge", "recall", "review", "site", "site-engines", "site-kills", "supersede", "team",
                         "team-purge"}
    assert [name for name in sorted(published)
            if page.count(f"<!-- bench:{name} -->") != 1 or page.count(f"<!-- /bench:{name} -->") != 1] == []


# A measured duration or speed-up: "4 ms", "~1.5 s", "0.25 seconds", "3x faster", "twice as fast",
# "2,000 memories/s".
TIMING = re.compile(r"(?<![\w.])~?\d[\d,]*(\.\d+)?\s?(ms|µs|us|ns|s|secs?|seconds?|minutes?|min|hours?)\b(?!-)"
                    r"|\b(\d+(\.\d+)?x|(\d+|two|three|four|five|six|seven|eight|nine|ten) times) "
                    r"(faster|slower|quicker)\b"
                    r"|\btwice as (fast|slow)\b"
                    r"|\d[\d,.]* ?(commits|memories|writes|files|items)/s\b", re.I)


def comments_and_docstrings(path: Path) -> list[tuple[int, str]]:
    source = path.read_text()
    found = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                found += [(first.lineno + i, line) for i, line in enumerate(first.value.value.splitlines())]
    return found


@pytest.mark.slow
def test_no_timing_figures_in_code_comments() -> None:
    """Figures go stale in comments: they belong in docs/benchmarks.md, written by bench/."""
    figures = [f"{path.relative_to(ROOT)}:{line}: {text.strip()}"
               for path in sorted((ROOT / "memsite").rglob("*.py"))
               for line, text in comments_and_docstrings(path) if TIMING.search(text)]
    assert figures == []
