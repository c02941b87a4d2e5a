"""Real repositories for the plumbing tests, and git run on them with its answers as bytes."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsite.git import Author, Repository
from memsite.git.settings import git_environment


def run(repo: Path, *args: str, input: bytes | None = None, check: bool = True, **env: str) -> bytes:
    """git's standard output (bytes) for ``args`` in ``repo`` (``env``: variables to set for it); fails the test
    with git's message if it fails."""
    result = subprocess.run(["git", *args], cwd=repo, input=input, capture_output=True, env=git_environment(**env))
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {result.stderr.decode(errors='replace')}")
    return result.stdout


def text(repo: Path, *args: str) -> str:
    return run(repo, *args).decode("utf-8", "surrogateescape")


def fsck(repo: Path) -> None:
    """``git fsck --strict`` finds nothing wrong (no error, no warning)."""
    result = subprocess.run(["git", "fsck", "--strict", "--no-progress", "--no-dangling"], cwd=repo,
                            capture_output=True, text=True, env=git_environment())
    assert result.returncode == 0 and not result.stderr.strip() and not result.stdout.strip(), \
        result.stdout + result.stderr


def init(path: Path, *extra: str) -> Path:
    """A new non-bare repository on branch main (no commit yet)."""
    subprocess.run(["git", "init", "-q", "-b", "main", *extra, str(path)], check=True, env=git_environment())
    return path


def commit_files(repo: Path, files: dict[str, bytes], message: str = "files") -> str:
    """Write ``files`` in the working tree, ``git add`` and ``git commit`` them; the new commit id."""
    for rel, data in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    run(repo, "add", "--", *files)
    run(repo, "commit", "-q", "-m", message)
    return text(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with one commit (``README.md``) on main, checked out."""
    path = init(tmp_path / "repo")
    commit_files(path, {"README.md": b"# notes\n"}, "first")
    return path


WHEN = 1_764_230_400


@pytest.fixture
def opened(repo: Path) -> Iterator[Repository]:
    """``repo`` opened as memsite opens a repository (its state folder ignored, as ``memsite init`` has it)."""
    (repo / ".git" / "info" / "exclude").write_text(".memsite/\n")
    repository = Repository(repo)
    try:
        yield repository
    finally:
        repository.close()


def memsite_commit(repository: Repository, files: dict[str, bytes | None], message: str, *,
                   ref: str = "refs/heads/main", when: int = WHEN, **options: object) -> str | None:
    """``Repository.commit`` of ``files`` on top of where ``ref`` is, under the repository lock, by agent planner."""
    with repository.locked():
        return repository.commit(ref, repository.refs.read(ref), files, message=message,
                                 author=Author.writer("planner"),
                                 when=when, **options)  # type: ignore[arg-type]
