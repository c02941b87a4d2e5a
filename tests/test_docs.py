"""The README is part of the product: its examples run, its commands are the real ones."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from memsite.cli import main
from tests.test_llm import Endpoint, chat

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def test_the_python_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    api, extraction, *integrations = blocks("python")
    for block in integrations:  # they need an LLM or an agent framework: compiled, not run
        compile(block, "README.md", "exec")
    exec(compile(api, "README.md", "exec"), {})
    log = subprocess.run(["git", "-C", "agent-memory", "log", "--format=%an %s"], capture_output=True, text=True)
    assert "planner Import notes from session 12" in log.stdout
    assert "planner Forget preferences:" in log.stdout

    server = Endpoint(chat(json.dumps([{"content": "Staging is the vega cluster.", "category": "entities"}])))
    server.start()
    exec(compile(extraction.replace("http://127.0.0.1:8080/v1", server.base_url), "README.md", "exec"), {})
    server.stop()
    log = subprocess.run(["git", "-C", "agent-memory", "log", "-1", "--format=%B"], capture_output=True, text=True)
    assert "Ingest-Batch: run-42 0-1" in log.stdout and len(server.requests) == 1


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


def test_the_command_table_lists_every_command() -> None:
    documented = set(re.findall(r"^\| `memsite ([\w-]+)", README, re.M))
    assert documented == set(main.commands)
