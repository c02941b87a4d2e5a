"""A second machine joins a team's memory: memsite clone, memsite init --remote, and the guide that says how."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsite import MemoryStore
from memsite.api import storage_of
from memsite.cli import main
from memsite.features.sync import sync
from tests.conftest import assert_clean, git
from tests.sites import env

ROOT = Path(__file__).resolve().parent.parent
TEAMS = (ROOT / "docs" / "guides" / "teams.md").read_text()


def plain_remote(where: Path) -> Path:
    """A bare remote as 'git init --bare' makes it: its HEAD names master (git's default), not main."""
    git(where.parent, "-c", "init.defaultBranch=master", "init", "-q", "--bare", str(where))
    return where


def test_clone_joins_a_remote_whose_head_names_master_and_that_holds_agent_branches(
        tmp_path: Path, store: MemoryStore) -> None:
    """The newcomer's first morning: 'git clone' of such a remote checks out nothing; 'memsite clone' joins."""
    bare = plain_remote(tmp_path / "team.git")
    git(store.root, "remote", "add", "origin", str(bare))
    written = store.remember("Deploys go through make release on Tuesdays", category="patterns")
    store.world.merge({"deploy.target": "staging"})
    sync(storage_of(store))  # main and agent/planner
    assert git(bare, "symbolic-ref", "HEAD").strip() == "refs/heads/master"
    assert sorted(git(bare, "for-each-ref", "--format=%(refname:short)").split()) == ["agent/planner", "main"]

    result = CliRunner().invoke(main, ["--agent", "coder", "clone", str(bare), str(tmp_path / "laptop")])
    assert result.exit_code == 0, result.output
    laptop = tmp_path / "laptop"
    assert f"Cloned {bare} into {laptop}: 1 memories on main, recall " in result.output
    assert "This clone writes as coder and publishes to agent/coder when it syncs." in result.output
    assert f"  cd {laptop}\n" in result.output and "memsite sync" in result.output
    assert git(laptop, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert git(laptop, "config", "memsite.agent").strip() == "coder"
    assert git(laptop, "config", "merge.memsite-world.driver")  # ready to merge before its first sync
    with MemoryStore(laptop) as joined:  # no --agent: the clone remembers who it is
        assert joined.agent == "coder"
        assert joined.recall("how do deploys happen")[0].memory.id == written.id
        assert joined.world.read() == {"deploy.target": "staging"}
        mine = joined.remember("The staging cluster is vega", category="entities")
        assert sync(storage_of(joined)).status == "integrated"
    assert git(bare, "log", "-1", "--format=%an", "main").strip() == "coder" and mine.commit
    assert_clean(laptop)


def test_init_remote_publishes_a_memory_that_a_plain_git_clone_checks_out(tmp_path: Path) -> None:
    bare = plain_remote(tmp_path / "team.git")
    result = CliRunner().invoke(main, ["--agent", "planner", "init", str(tmp_path / "first"), "--remote", str(bare)])
    assert result.exit_code == 0, result.output
    assert f"Published it to {bare} (branch main)" in result.output
    assert git(bare, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert git(tmp_path / "first", "rev-parse", "--abbrev-ref", "main@{upstream}").strip() == "origin/main"
    git(tmp_path, "clone", "-q", str(bare), str(tmp_path / "by-git"))
    assert (tmp_path / "by-git" / "mkdocs.yml").is_file()  # checked out, not "remote HEAD refers to nonexistent ref"
    again = CliRunner().invoke(main, ["init", str(tmp_path / "second"), "--remote", str(bare)])
    assert again.exit_code == 1 and not (tmp_path / "second").exists()
    assert again.output == (f"Error: {bare} already has a branch main; "
                            f"join that memory with 'memsite clone {bare}' instead\n")


def test_clone_of_an_empty_remote_makes_a_new_memory_and_publishes_it(tmp_path: Path) -> None:
    bare = plain_remote(tmp_path / "empty.git")
    with MemoryStore.clone(str(bare), tmp_path / "memory", agent="planner") as store:
        assert store.cloned == ("main", True) and store.agent == "planner"
    assert git(bare, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert git(bare, "ls-tree", "--name-only", "main").split()[:3] == [".gitattributes", ".github", ".gitignore"]


def not_memsite(tmp_path: Path) -> str:
    bare = plain_remote(tmp_path / "code.git")
    work = tmp_path / "code"
    git(tmp_path, "clone", "-q", str(bare), str(work))
    (work / "README").write_text("a project, not a memory\n")
    git(work, "add", "README")
    git(work, "-c", "user.name=p", "-c", "user.email=p@e", "commit", "-qm", "code")
    git(work, "push", "-q", "origin", "HEAD:main")
    return str(bare)


@pytest.mark.parametrize("case, expected", [
    ("folder", r"Error: {url}: not a git repository \('.*' does not appear to be a git repository\)"),
    ("code", r"Error: {url}: not a memsite memory \(branch main has no mkdocs.yml with memsite settings\); .*"),
    ("host", r"Error: cannot reach {url} \(.*\); nothing was made"),
    ("not empty", r"Error: {dest}: already exists and is not empty; clone into a new folder"),
])
def test_bad_input_to_clone_is_one_line_and_leaves_nothing(tmp_path: Path, store: MemoryStore, case: str,
                                                           expected: str) -> None:
    dest = tmp_path / "joined"
    if case == "folder":
        url = str(tmp_path / "just-a-folder")
        os.mkdir(url)
    elif case == "code":
        url = not_memsite(tmp_path)
    elif case == "host":
        url = "http://127.0.0.1:9/team/memory.git"  # nothing listens on the discard port
    else:
        url = str(plain_remote(tmp_path / "team.git"))
        git(store.root, "push", "-q", url, "main")
        dest.mkdir()
        (dest / "notes.txt").write_text("a person's notes\n")
    result = CliRunner().invoke(main, ["clone", url, str(dest)])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1
    assert re.fullmatch(expected.format(url=re.escape(url), dest=re.escape(str(dest))) + "\n", result.output), \
        result.output
    if case == "not empty":
        assert sorted(os.listdir(dest)) == ["notes.txt"]  # the person's folder, as it was
    else:
        assert not dest.exists()


@pytest.mark.slow
def test_the_join_a_team_section_of_the_guide_runs_word_for_word(tmp_path: Path) -> None:
    section = TEAMS.split("## Join a team", 1)[1].split("\n## ", 1)[0]
    publish, join = re.findall(r"```bash\n(.*?)```", section, re.S)
    bare = plain_remote(tmp_path / "team-memory.git")
    here = {**env(tmp_path / "home"), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    (tmp_path / "home").mkdir()
    (tmp_path / "server").mkdir()
    (tmp_path / "laptop").mkdir()

    def run(script: str, cwd: Path) -> str:
        result = subprocess.run(["bash", "-euc", script.replace("/srv/git/team-memory.git", str(bare))], cwd=cwd,
                                env=here, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    run(publish, tmp_path / "server")
    out = run(join, tmp_path / "laptop")
    assert "Cloned " in out and "This clone writes as coder" in out
    assert "Deploys go through make release" in out.rsplit("Synced", 1)[1]  # recalled after the sync
    assert git(bare, "log", "-1", "--format=%an %s", "main").strip() == \
        "coder Remember patterns: Deploys go through make release"
