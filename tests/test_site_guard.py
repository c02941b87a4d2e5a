"""A memory repository from a pull request must not make the site build publish the host or run code."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsite.cli import main

MARKER = "HOST-ONLY-MARKER-7f3a9c"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "memory"
    assert CliRunner().invoke(main, ["init", str(path)]).exit_code == 0
    return path


def run(repo: Path, *args: str):
    return CliRunner().invoke(main, ["-C", str(repo), *args])


def host_links(repo: Path, tmp_path: Path) -> None:
    """content/hostdir -> a host folder, content/leak.txt -> a host file (root-only), content/etc -> /etc."""
    host = tmp_path / "host"
    (host / "private").mkdir(parents=True)
    secret = host / "private" / "shadow"
    secret.write_text(f"root:{MARKER}:19000::::::\n")
    secret.chmod(0o600)
    (host / "notes.txt").write_text(f"{MARKER}\n")
    os.symlink(host / "private", repo / "content" / "hostdir")
    os.symlink(host / "notes.txt", repo / "content" / "leak.txt")
    os.symlink("/etc", repo / "content" / "etc")
    os.symlink("../.git/config", repo / "content" / "gitconfig")


def published(site: Path) -> list[str]:
    """Files of the built site holding the host marker, or copied from /etc or .git."""
    found = []
    for path in site.rglob("*"):
        if path.is_file() and (MARKER.encode() in path.read_bytes() or path.name in ("passwd", "shadow", "config")):
            found.append(str(path.relative_to(site)))
    return found


def test_links_to_files_out_of_the_repository_are_never_published(repo: Path, tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    host_links(repo, tmp_path)
    for folder in ("hostdir", "etc"):
        (repo / "content" / folder).unlink()
    built = run(repo, "build", "--site-dir", str(tmp_path / "site"))
    assert built.exit_code == 0, built.output
    site = tmp_path / "site"
    assert (site / "index.html").is_file()
    assert published(site) == [] and not (site / "leak.txt").exists()
    for link in ("content/leak.txt", "content/gitconfig"):
        assert sum(f"{link}: skipped: a symlink to " in m for m in caplog.messages) == 1  # one warning each


def test_a_link_to_a_folder_out_of_the_repository_stops_the_build_before_mkdocs_walks_it(
        repo: Path, tmp_path: Path) -> None:
    """MkDocs' walk of docs_dir follows every link (``content/etc -> /``: the whole disk); memsite stops first."""
    host_links(repo, tmp_path)
    os.symlink("..", repo / "content" / "up")  # a folder that holds the link: walked round and round
    built = run(repo, "build", "--site-dir", str(tmp_path / "site"))
    assert built.exit_code == 1
    lines = [line.removeprefix("warning: ") for line in built.stderr.splitlines()][:3]
    assert lines == ["content/etc: a symlink to /etc, outside the repository; remove the link (the site build "
                     "would walk it)",
                     f"content/hostdir: a symlink to {tmp_path / 'host' / 'private'}, outside the repository; remove "
                     "the link (the site build would walk it)",
                     "content/up: a symlink to .., a folder that holds it; remove the link (the site build would "
                     "walk it)"], built.stderr
    assert not (tmp_path / "site").exists() or published(tmp_path / "site") == []


@pytest.mark.slow
def test_plain_mkdocs_build_is_guarded_by_the_plugin_too(repo: Path, tmp_path: Path) -> None:
    """CI runs ``mkdocs build``: the plugin refuses a folder link before MkDocs' walk, and leaves file links out."""
    host_links(repo, tmp_path)
    result = subprocess.run(["mkdocs", "build", "--site-dir", str(tmp_path / "site")], cwd=repo,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode != 0 and "content/etc: a symlink to /etc, outside the repository" in result.stderr
    assert not (tmp_path / "site").exists() or published(tmp_path / "site") == []
    for folder in ("hostdir", "etc"):
        (repo / "content" / folder).unlink()
    result = subprocess.run(["mkdocs", "build", "--site-dir", str(tmp_path / "site")], cwd=repo,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert published(tmp_path / "site") == []
    strict = subprocess.run(["mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "strict")], cwd=repo,
                            capture_output=True, text=True, timeout=600)
    assert strict.returncode != 0 and "content/leak.txt: skipped" in strict.stderr


def test_check_fails_naming_every_link_out_of_the_repository(repo: Path, tmp_path: Path) -> None:
    host_links(repo, tmp_path)
    os.symlink("index.md", repo / "content" / "home.md")  # inside the repository: fine
    os.symlink("..", repo / "content" / "up")  # a folder holding the link: the build stops at it
    result = run(repo, "check")
    assert result.exit_code == 1
    lines = [line for line in result.stdout.splitlines() if "symlink" in line]
    assert sorted(line.split(":")[0] for line in lines) == [
        "content/etc", "content/gitconfig", "content/hostdir", "content/leak.txt", "content/up"]
    assert all("remove the link" in line for line in lines)
    assert all("outside the repository" in line for line in lines if not line.startswith("content/up"))
    assert "content/up: a symlink to .., a folder that holds it; the site build stops at it" in result.stdout
    assert "content/leak.txt: a symlink to" in result.stdout and "the site build skips it" in result.stdout


def _append(repo: Path, text: str) -> None:
    with open(repo / "mkdocs.yml", "a", encoding="utf-8") as handle:
        handle.write(text)


def test_a_python_tag_in_mkdocs_yml_is_refused_before_anything_runs(repo: Path, tmp_path: Path) -> None:
    proof = tmp_path / "ran"
    line = len((repo / "mkdocs.yml").read_text().splitlines()) + 1
    _append(repo, f'foo: !!python/object/apply:os.system ["touch {proof}"]\n')
    checked = run(repo, "check")
    assert checked.exit_code == 1
    assert f"mkdocs.yml:{line}: python tags (!!python/object/apply) are refused; remove it" in checked.stdout
    built = run(repo, "build", "--site-dir", str(tmp_path / "site"))
    assert built.exit_code == 1
    assert f"mkdocs.yml:{line}: python tags (!!python/object/apply) are refused" in built.stderr
    assert "Traceback" not in built.output
    assert not proof.exists() and not (tmp_path / "site").exists()


def test_a_python_tag_in_an_inherited_file_is_refused_too(repo: Path, tmp_path: Path) -> None:
    proof = tmp_path / "ran"
    (repo / "base.yml").write_text(f'x: !!python/object/new:os.system ["touch {proof}"]\n')
    _append(repo, "INHERIT: base.yml\n")
    built = run(repo, "build", "--site-dir", str(tmp_path / "site"))
    assert built.exit_code == 1 and "base.yml:1: python tags (!!python/object/new) are refused" in built.stderr
    assert not proof.exists()


def test_mkdocs_own_tags_and_materials_documented_names_still_build(repo: Path, tmp_path: Path) -> None:
    _append(repo, "copyright: !ENV [MEMSITE_TEST_COPYRIGHT, 'Made with memsite']\n"
                  "markdown_extensions:\n  - pymdownx.emoji:\n"
                  "      emoji_index: !!python/name:material.extensions.emoji.twemoji\n"
                  "      emoji_generator: !!python/name:material.extensions.emoji.to_svg\n")
    assert run(repo, "check").exit_code == 0
    built = run(repo, "build", "--site-dir", str(tmp_path / "site"))
    assert built.exit_code == 0, built.output
    assert "Made with memsite" in (tmp_path / "site" / "index.html").read_text()


def test_check_warns_when_mkdocs_yml_adds_code_to_the_build(repo: Path) -> None:
    text = (repo / "mkdocs.yml").read_text()
    text = text.replace("plugins:\n", "plugins:\n  tags:\n  material/offline:\n  macros:\n")
    (repo / "mkdocs.yml").write_text(text + "hooks:\n  - hooks/memsite_hooks.py\n  - hooks/extra.py\n")
    (repo / "hooks").mkdir()
    (repo / "hooks" / "memsite_hooks.py").write_text("import os\nos.system('true')\n")
    result = run(repo, "check")
    assert result.exit_code == 0  # a warning for the reviewer, not a failure
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 3, result.stderr
    assert "'hooks/extra.py' adds code to the site build" in warnings[0]
    assert "'macros' is not a built-in plugin" in warnings[1]
    assert "hooks/memsite_hooks.py: differs from the adapter memsite writes" in warnings[2]


def test_a_fresh_repository_checks_without_warnings(repo: Path) -> None:
    result = run(repo, "check")
    assert result.exit_code == 0 and "warning" not in result.stderr
