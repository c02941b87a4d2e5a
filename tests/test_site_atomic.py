"""Site builds replace the site whole or not at all: killed, interrupted, failed, or given a bad site folder."""

from __future__ import annotations

import hashlib
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsite import MemoryStore
from memsite.cli import main
from memsite.site import search
from memsite.site.output import RECORD, STAMP
from tests import faults
from tests.site_build_process import KILL_POINTS
from tests.sites import ROOT, env

EPOCH = "1767225600"
SEARCH_FILES = (f"{search.MAIN}/", f"{search.DELTA}/")


def tree(site: Path) -> dict[str, str]:
    """Every file of a built site and a digest of its bytes (the build's own record left out)."""
    return {p.relative_to(site).as_posix(): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(site.rglob("*")) if p.is_file() and p.name != RECORD}


def same_site(site: Path, expected: dict[str, str], searched: dict[str, str]) -> None:
    """``site`` holds the pages of ``expected`` byte for byte, and its search finds the same pages in the same
    form as the site ``searched`` describes (a build that kept an earlier index splits it in two: search.py)."""
    pages = {path: digest for path, digest in tree(site).items() if not path.startswith(SEARCH_FILES)}
    assert pages == {path: digest for path, digest in expected.items() if not path.startswith(SEARCH_FILES)}
    assert search.searchable(site) == searched


def run_build(repo: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memsite", "-C", str(repo), "build", *args], cwd=ROOT,
                          env={**env(home), "SOURCE_DATE_EPOCH": EPOCH}, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], dict[str, str]]:
    """A repository whose site/ is built (the old site), with three memories more since (the new site's tree).

    Built twice, so that the site before it is kept as .site.spare/ (sharing its files with site/ as hard
    links), which the next build starts from: a build that wrote one of them in place would change site/."""
    base = tmp_path_factory.mktemp("atomic")
    repo = base / "memory"
    with MemoryStore.init(repo, agent="planner") as store:
        store.remember("Deploys go out on Tuesdays", category="events")
        store.remember("The user prefers tabs over spaces", category="preferences")
    assert run_build(repo, home=base).returncode == 0
    with MemoryStore(repo, agent="planner") as store:
        store.remember("The cache is flushed nightly", category="entities")
    assert run_build(repo, home=base).returncode == 0
    assert (repo / ".site.spare" / STAMP).is_file()
    old = tree(repo / "site")
    with MemoryStore(repo, agent="planner") as store:  # three pages to write: a build can stop between them
        store.remember("Postgres locks the table during a migration", category="cases")
        store.remember("The billing service deploys on Thursdays", category="events")
        store.remember("Staging uses the vega VPN", category="entities")
    result = run_build(repo, "--site-dir", str(base / "expected"), home=base)
    assert result.returncode == 0, result.stderr
    new = tree(base / "expected")
    assert len([p for p in new if p.startswith("m/")]) == len([p for p in old if p.startswith("m/")]) + 3
    SEARCHED[repo] = search.searchable(base / "expected")
    return repo, old, new


SEARCHED: dict[Path, dict[str, str]] = {}  # the built repository -> what a search of its new site finds


def copy(repo: Path, to: Path) -> Path:
    """A copy of the repository, its site and spare sharing files as in the original (``cp -a`` keeps links)."""
    subprocess.run(["cp", "-a", str(repo), str(to / "memory")], check=True)
    assert any(page.stat().st_nlink > 1 for page in (to / "memory" / "site" / "m").glob("*/index.html"))
    return to / "memory"


@pytest.mark.parametrize("how", ["kill", "int"])
@pytest.mark.parametrize("point", [  # (one point mid-way in the quick suite; every point in the full one)
    pytest.param(point, marks=() if point == "memory-page-written" else pytest.mark.slow) for point in KILL_POINTS])
def test_a_build_stopped_at_any_point_leaves_a_whole_site(built: tuple[Path, dict[str, str], dict[str, str]],
                                                          tmp_path: Path, point: str, how: str) -> None:
    """kill -9 or Ctrl-C anywhere in the build: site/ is the old site or the new one, never a mix or nothing; and
    what the fault suite checks after any kill holds (tests/faults.py)."""
    source, old, new = built
    repo = copy(source, tmp_path)
    stopped = subprocess.run([sys.executable, "-m", "tests.site_build_process", str(repo), point, how], cwd=ROOT,
                             env={**env(tmp_path), "SOURCE_DATE_EPOCH": EPOCH}, capture_output=True, text=True,
                             timeout=300)
    # stopped at the point, so mid-build: not before it started, not after it ended
    assert stopped.returncode == (-signal.SIGKILL if how == "kill" else 130), stopped.stderr
    if how == "int":
        assert "Interrupted: the site was not replaced" in stopped.stderr or point == "swapped"
        assert "Traceback" not in stopped.stderr
    if point == "swapped":
        same_site(repo / "site", new, SEARCHED[source])
    else:
        assert tree(repo / "site") == old
    rebuilt = run_build(repo, home=tmp_path)
    assert rebuilt.returncode == 0, rebuilt.stderr
    if point != "swapped":
        ended = "interrupted (Ctrl-C)" if how == "int" else "stopped (killed or interrupted)"
        assert f"note: the build of {repo / 'site'} started" in rebuilt.stderr
        assert f"was {ended}; {repo / 'site'} still holds the build before it" in rebuilt.stderr
    same_site(repo / "site", new, SEARCHED[source])
    assert [p.name for p in repo.iterdir() if p.name.startswith(".site.building")] == []
    with MemoryStore(source, agent="reader") as store:
        memories = {m.id for m in store.list()}
    assert faults.recover_and_verify(repo, memories, set(), stopped.stderr) == []


def test_doctor_names_an_interrupted_build_and_fix_removes_what_it_left(
        built: tuple[Path, dict[str, str], dict[str, str]], tmp_path: Path) -> None:
    source, old, _ = built
    repo = copy(source, tmp_path)
    subprocess.run([sys.executable, "-m", "tests.site_build_process", str(repo), "memory-page-written", "kill"],
                   cwd=ROOT, env=env(tmp_path), capture_output=True, timeout=300)
    found = CliRunner().invoke(main, ["-C", str(repo), "doctor"])
    assert found.exit_code == 1
    assert "was stopped (killed or interrupted)" in found.stderr and "--fix removes what it left" in found.stderr
    fixed = CliRunner().invoke(main, ["-C", str(repo), "doctor", "--fix"])
    assert "removed .site.building-" in fixed.stderr, fixed.stderr
    assert not [p for p in repo.iterdir() if p.name.startswith(".site.building")]
    assert tree(repo / "site") == old


def test_a_failed_build_leaves_the_site_and_no_leftover(built: tuple[Path, dict[str, str], dict[str, str]],
                                                        tmp_path: Path) -> None:
    source, old, _ = built
    repo = copy(source, tmp_path)
    (repo / "content" / "memories" / "broken.md").write_text("---\nid: [unclosed\n---\nbroken\n")
    failed = run_build(repo, "--strict", home=tmp_path)
    assert failed.returncode == 1 and "broken.md" in failed.stderr
    assert tree(repo / "site") == old
    # (.site.old-*: what the build moved out of the spare it started from, which a process of its own removes)
    assert not [p for p in repo.iterdir() if p.name.startswith(".site.building")]


@pytest.mark.parametrize("kind", ["file", "symlink", "foreign"])
def test_a_site_folder_the_build_cannot_replace_whole_is_one_line_and_untouched(
        built: tuple[Path, dict[str, str], dict[str, str]], tmp_path: Path, kind: str) -> None:
    source, _, _ = built
    repo = copy(source, tmp_path)
    shutil.rmtree(repo / "site")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("mine")
    if kind == "file":
        (repo / "site").write_text("not a folder")
    elif kind == "symlink":
        (repo / "site").symlink_to(elsewhere)
    else:
        shutil.copytree(elsewhere, repo / "site")
    result = CliRunner().invoke(main, ["-C", str(repo), "build"])
    assert result.exit_code == 1
    message = result.stderr.strip().splitlines()
    assert len(message) == 1, result.stderr
    assert {"file": "is a file, not a folder", "symlink": "is a symlink to",
            "foreign": "holds files no site build wrote"}[kind] in message[0]
    assert (elsewhere / "notes.txt").read_text() == "mine"
    if kind == "file":
        assert (repo / "site").read_text() == "not a folder"
    else:
        assert sorted(p.name for p in (repo / "site").iterdir()) == ["notes.txt"]


def test_a_site_built_by_another_memsite_version_is_said_and_built_again(
        built: tuple[Path, dict[str, str], dict[str, str]], tmp_path: Path) -> None:
    source, _, new = built
    repo = copy(source, tmp_path)
    (repo / "site" / STAMP).write_text('{"memsite": "0.0.9", "engine": "mkdocs"}\n')
    result = run_build(repo, home=tmp_path)
    assert result.returncode == 0
    assert f"note: {repo / 'site'} was built by memsite 0.0.9" in result.stderr
    assert tree(repo / "site") == new


def test_plain_mkdocs_build_is_atomic_too(built: tuple[Path, dict[str, str], dict[str, str]], tmp_path: Path) -> None:
    """``mkdocs build`` runs the plugin, which writes a fresh folder and swaps it in (the same files)."""
    source, _, new = built
    repo = copy(source, tmp_path)
    result = subprocess.run(["mkdocs", "build", "--strict"], cwd=repo, capture_output=True, text=True, timeout=300,
                            env={**env(tmp_path), "SOURCE_DATE_EPOCH": EPOCH})
    assert result.returncode == 0, result.stderr
    assert "not included in the" not in result.stderr  # generated pages are no "not in the nav" news
    same_site(repo / "site", new, SEARCHED[source])
    assert not [p for p in repo.iterdir() if p.name.startswith(".site.building")]


def test_plain_mkdocs_build_failing_strict_leaves_the_site(built: tuple[Path, dict[str, str], dict[str, str]],
                                                           tmp_path: Path) -> None:
    """--strict fails after the last plugin event: the finished folder is still not swapped in."""
    source, old, _ = built
    repo = copy(source, tmp_path)
    (repo / "content" / "memories" / "broken.md").write_text("---\nid: [unclosed\n---\nbroken\n")
    result = subprocess.run(["mkdocs", "build", "--strict"], cwd=repo, capture_output=True, text=True, timeout=300,
                            env={**env(tmp_path), "SOURCE_DATE_EPOCH": EPOCH})
    assert result.returncode == 1 and "Aborted with 1 warnings in strict mode" in result.stdout + result.stderr
    assert tree(repo / "site") == old
    assert not [p for p in repo.iterdir() if p.name.startswith(".site.building")]
