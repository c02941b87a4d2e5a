"""The same site from MkDocs, ProperDocs and Zensical; an engine that cannot build it is one line."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsite import MemoryStore
from memsite.cli import main
from memsite.site.output import STAMP
from tests.sites import memsite

ENGINES = ("mkdocs", "properdocs", "zensical")


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One repository (memories, a closed task, world state) built by each engine into its own folder."""
    base = tmp_path_factory.mktemp("engines")
    repo = base / "memory"
    with MemoryStore.init(repo, agent="planner") as store:
        store.remember("Deploys go out on Tuesdays", category="events")
        store.remember("Postgres locks the table during a migration", category="cases")
        with store.task(type="bugfix", keywords=["migration lock"]) as task:
            task.problem("the migration waited on a lock")
            task.solution("set lock_timeout")
            task.learn("Run the migration with lock_timeout set")
        store.world.merge({"deploy.day": "Tuesday"})
    built = {}
    for engine in ENGINES:
        built[engine] = base / f"site-{engine}"
        memsite("-C", str(repo), "build", "--engine", engine, "--site-dir", str(built[engine]), home=base)
    return built


def pages(site: Path) -> set[str]:
    return {p.relative_to(site).as_posix() for p in site.rglob("index.html")}


@pytest.mark.slow  # three builds
def test_every_engine_gives_every_page_the_same_address(sites: dict[str, Path]) -> None:
    mkdocs = pages(sites["mkdocs"])
    assert {"index.html", "rankings/index.html", "memories/cases/index.html", "world/index.html",
            "skills/index.html", "agents/planner/index.html", "sessions/index.html", "weeks/index.html",
            "days/index.html"} <= mkdocs
    assert sum(p.startswith("m/") for p in mkdocs) == 3  # two memories and the task's learning
    assert any(p.startswith("summaries/") for p in mkdocs) and any(p.startswith("reports/") for p in mkdocs)
    for engine in ("properdocs", "zensical"):
        assert pages(sites[engine]) == mkdocs, engine
        assert (sites[engine] / "pagefind" / "pagefind-entry.json").is_file()
        assert f'"engine": "{engine}"' in (sites[engine] / STAMP).read_text()
    assert not (sites["zensical"] / "search.json").exists()  # Zensical's whole-site index: Pagefind searches
    for engine, site in sites.items():  # no page is left with a placeholder for memsite's HTML
        assert not [p for p in site.rglob("*.html") if "<!--memsite-html" in p.read_text(encoding="utf-8")], engine


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "memory"
    with MemoryStore.init(path, agent="planner") as store:
        store.remember("Deploys go out on Tuesdays", category="events")
    return path


def test_an_engine_that_is_not_installed_is_one_line_and_builds_nothing(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.version

    def version(name: str) -> str:
        if name == "zensical":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    result = CliRunner().invoke(main, ["-C", str(repo), "build", "--engine", "zensical"])
    assert result.exit_code == 1
    assert result.stderr.strip() == ("Error: the zensical engine is not installed: pip install 'memsite[zensical]' "
                                     "(or choose another with --engine)")
    assert not (repo / "site").exists() and not list(repo.glob(".site.*"))


def test_a_zensical_memsite_was_not_tried_with_is_one_line(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.0.20" if name == "zensical" else real(name))
    result = CliRunner().invoke(main, ["-C", str(repo), "build", "--engine", "zensical"])
    assert result.exit_code == 1
    assert "zensical 0.0.20 is installed; memsite builds with zensical 0.0.73 up to 0.1" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_mkdocs_yml_naming_an_unknown_engine_is_one_line(repo: Path) -> None:
    text = (repo / "mkdocs.yml").read_text()
    (repo / "mkdocs.yml").write_text(text.replace("    engine: mkdocs\n", "    engine: hugo\n"))
    result = CliRunner().invoke(main, ["-C", str(repo), "build"])
    assert result.exit_code == 1
    assert "plugins.memsite.engine': expected mkdocs or properdocs or zensical, got 'hugo'" in result.stderr
    assert not (repo / "site").exists()
