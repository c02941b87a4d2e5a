"""memsite as a MkDocs plugin, and the repositories made before it (hooks + extra.memsite) building as they did."""

from __future__ import annotations

import filecmp
import subprocess
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from memsite import MemoryStore
from memsite.cli import main
from memsite.features.site_guard import HOOKS_PATH, HOOKS_PY
from memsite.site.plugin import MemsitePlugin
from tests.sites import env

SOURCE_DATE_EPOCH = "1767225600"  # the same build time for both builds


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "memory"
    with MemoryStore.init(path, agent="planner") as store:
        store.remember("Deploys go out on Tuesdays", category="events")
        store.remember("The user prefers tabs over spaces", category="preferences")
    return path


def legacy(repo: Path) -> None:
    """Rewrite ``repo``'s mkdocs.yml as ``memsite init`` wrote it before the plugin: hooks and extra.memsite."""
    data = yaml.safe_load((repo / "mkdocs.yml").read_text())
    settings = data["plugins"].pop("memsite")
    data["plugins"] = ["search"]
    data["hooks"] = [HOOKS_PATH]
    data["extra"] = {"memsite": settings}
    (repo / "mkdocs.yml").write_text(yaml.safe_dump(data, sort_keys=False))
    (repo / HOOKS_PATH).parent.mkdir()
    (repo / HOOKS_PATH).write_text(HOOKS_PY)


def mkdocs(repo: Path, site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mkdocs", "build", "--strict", "--site-dir", str(site), *args], cwd=repo,
                          capture_output=True, text=True, timeout=600,
                          env={**env(repo.parent), "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH})


def files(site: Path) -> list[str]:
    return sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file())


def test_the_plugin_is_registered_for_mkdocs() -> None:
    """``pip install -e .`` registers it: MkDocs finds plugins by entry point only."""
    (point,) = entry_points(group="mkdocs.plugins", name="memsite")
    assert point.load() is MemsitePlugin


@pytest.mark.slow
def test_a_repository_made_before_the_plugin_builds_the_same_site_with_a_note(repo: Path, tmp_path: Path) -> None:
    new = mkdocs(repo, tmp_path / "plugin")
    assert new.returncode == 0, new.stderr
    assert "deprecated" not in new.stderr
    legacy(repo)
    old = mkdocs(repo, tmp_path / "hooks")
    assert old.returncode == 0, old.stderr  # --strict: the note is no warning
    notes = [line for line in old.stderr.splitlines() if "deprecated" in line]
    assert len(notes) == 1 and "extra.memsite" in notes[0] and "plugins: memsite:" in notes[0]
    assert files(tmp_path / "plugin") == files(tmp_path / "hooks")
    for page in ("index.html", "memories/events/index.html", "rankings/index.html", "pagefind/pagefind-entry.json"):
        assert filecmp.cmp(tmp_path / "plugin" / page, tmp_path / "hooks" / page, shallow=False), page
    assert CliRunner().invoke(main, ["-C", str(repo), "check"]).exit_code == 0


def test_bad_settings_name_every_key_in_mkdocs_build_and_memsite_build(repo: Path, tmp_path: Path) -> None:
    text = (repo / "mkdocs.yml").read_text()
    (repo / "mkdocs.yml").write_text(text.replace("    trim: archive\n", "    trim: shred\n    colour: blue\n")
                                     .replace("half_life_days: 30", "half_life_days: 0"))
    plain = mkdocs(repo, tmp_path / "site")
    assert plain.returncode != 0
    for line in ("Plugin 'memsite' option 'trim': expected archive or delete, got 'shred'",
                 "Plugin 'memsite' option 'colour': expected one of ",
                 "Plugin 'memsite' option 'decay.half_life_days': expected a number > 0, got 0"):
        assert line in plain.stderr, plain.stderr
    built = CliRunner().invoke(main, ["-C", str(repo), "build", "--site-dir", str(tmp_path / "site")])
    assert built.exit_code == 1
    assert "Config value 'plugins.memsite.trim': expected archive or delete, got 'shred'" in built.stderr
    assert "Config value 'plugins.memsite.decay.half_life_days'" in built.stderr
    assert "Traceback" not in built.output


def test_old_settings_beside_new_ones_are_refused(repo: Path, tmp_path: Path) -> None:
    with open(repo / "mkdocs.yml", "a", encoding="utf-8") as handle:
        handle.write("extra:\n  memsite: {trim: delete}\n")
    built = CliRunner().invoke(main, ["-C", str(repo), "build", "--site-dir", str(tmp_path / "site")])
    assert built.exit_code == 1
    assert "memsite settings in both plugins.memsite and extra.memsite" in built.stderr


def test_the_plugin_and_the_old_hook_together_are_refused(repo: Path, tmp_path: Path) -> None:
    with open(repo / "mkdocs.yml", "a", encoding="utf-8") as handle:
        handle.write(f"hooks:\n  - {HOOKS_PATH}\n")
    (repo / HOOKS_PATH).parent.mkdir()
    (repo / HOOKS_PATH).write_text(HOOKS_PY)
    result = mkdocs(repo, tmp_path / "site")
    assert result.returncode != 0 and "names memsite in plugins and in hooks" in result.stderr


def test_memsite_build_says_to_reinstall_when_the_plugin_is_not_registered(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout pulled past the plugin, with memsite installed before it: MkDocs would only say 'not installed'."""
    import mkdocs.plugins

    monkeypatch.setattr(mkdocs.plugins, "get_plugins", dict)  # what an install without the entry point has
    built = CliRunner().invoke(main, ["-C", str(repo), "build", "--site-dir", str(tmp_path / "site")])
    assert built.exit_code == 1
    assert "names the memsite plugin, which MkDocs finds only once memsite is installed" in built.stderr
    assert "pip install -e ." in built.stderr
