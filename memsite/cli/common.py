"""What every ``memsite`` command shares: the group, its context, errors as one line, progress."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ..api import MemoryStore
from ..errors import MemsiteError
from ..model import Memory

F = TypeVar("F", bound=Callable[..., Any])


def errors_as_messages(func: F) -> F:
    """A ``MemsiteError`` becomes one line and exit status 1; Ctrl-C becomes click's 'Aborted!'."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except MemsiteError as exc:
            raise click.ClickException(str(exc)) from None
        except KeyboardInterrupt:
            raise click.Abort() from None

    return wrapper  # type: ignore[return-value]


class Context:
    """What the group's options chose: the repository and the agent; opens the store."""

    def __init__(self, repo: str, agent: str | None) -> None:
        self.repo = repo
        self.agent = agent

    def store(self) -> MemoryStore:
        return MemoryStore(self.repo, agent=self.agent, progress=ProgressBar())


class ProgressBar:
    """Shows a bar on stderr while the index is rebuilt (or other long work), when that is long enough to wait for."""

    def __init__(self, label: str = "Indexing memories") -> None:
        self._bar: Any = None
        self.label = label

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None and total >= 1000:
            self._bar = click.progressbar(length=total, label=self.label, file=sys.stderr)
            self._bar.__enter__()
        if self._bar is not None:
            self._bar.update(done - self._bar.pos)
            if done >= total:
                self._bar.__exit__(None, None, None)
                self._bar = None


pass_context = click.make_pass_decorator(Context)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "--repo", default=".", envvar="MEMSITE_DIR", show_envvar=True,
              help="The memory repository (default: the current folder).")
@click.option("--agent", envvar="MEMSITE_AGENT", show_envvar=True,
              help="Who writes: the commit author (default: git user.name, else 'human').")
@click.version_option(package_name="memsite")
@click.pass_context
def main(ctx: click.Context, repo: str, agent: str | None) -> None:
    """Agent memory in a git repository: written through an API, read as a
    website, reviewed as pull requests.

    \b
    Quick start:
        memsite init my-memory
        cd my-memory
        memsite remember "User prefers tabs over spaces" --category preferences
        memsite list
    """
    ctx.obj = Context(repo, agent)


def repo_root(ctx: Context) -> Path:
    """The working tree's top folder (for commands that need no store)."""
    from ..git import Repository

    repo = Repository(ctx.repo)
    try:
        return repo.root
    finally:
        repo.close()


def as_dict(memory: Memory) -> dict[str, Any]:
    """A memory as the JSON the commands print: its frontmatter, content, path and commit."""
    from ..fileformat import memory_fields

    data = memory_fields(memory)
    data["content"] = memory.content
    data["path"] = str(memory.path) if memory.path else None
    data["commit"] = memory.commit
    return data
