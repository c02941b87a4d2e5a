"""The ``memsite`` command: a thin shell over the Python API.

Commands hold no logic of their own; a ``MemsiteError`` becomes one line on
stderr and exit status 1, never a traceback.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from .errors import MemsiteError
from .model import Memory, format_time
from .store import MemoryStore

F = TypeVar("F", bound=Callable[..., Any])


def _errors_as_messages(func: F) -> F:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except MemsiteError as exc:
            raise click.ClickException(str(exc)) from None
        except KeyboardInterrupt:
            raise click.Abort() from None

    return wrapper  # type: ignore[return-value]


class _Context:
    def __init__(self, repo: str, agent: str | None) -> None:
        self.repo = repo
        self.agent = agent

    def store(self) -> MemoryStore:
        return MemoryStore(self.repo, agent=self.agent)


pass_context = click.make_pass_decorator(_Context)


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
    ctx.obj = _Context(repo, agent)


@main.command()
@click.argument("path", default=".", type=click.Path(file_okay=False))
@pass_context
@_errors_as_messages
def init(ctx: _Context, path: str) -> None:
    """Create a memory repository in PATH (runs git init if needed).

    Writes mkdocs.yml (site and memsite settings, with the categories and how
    to set capacity marks), content/ and .gitignore, and commits them.

    \b
    Example:
        memsite init my-memory
    """
    with MemoryStore.init(path, agent=ctx.agent) as store:
        click.echo(f"Initialised memory repository in {store.root}")


@main.command()
@click.argument("content", required=False)
@click.option("-c", "--category", default="general", show_default=True,
              help="Category or alias (e.g. preferences, user_pref, cases).")
@click.option("--abstract", help="One-line summary (default: the first line).")
@click.option("--overview", help="Short paragraph (default: the first paragraph).")
@click.option("-t", "--tag", "tags", multiple=True, help="A tag; repeat for several.")
@click.option("--source", help="The session or origin this came from.")
@click.option("--pinned", is_flag=True, help="Exempt from decay and trimming.")
@click.option("--json", "as_json", is_flag=True, help="Print the memory as JSON.")
@pass_context
@_errors_as_messages
def remember(ctx: _Context, content: str | None, category: str, abstract: str | None, overview: str | None,
             tags: tuple[str, ...], source: str | None, pinned: bool, as_json: bool) -> None:
    """Remember CONTENT (or standard input when CONTENT is '-' or absent).

    Each memory is one commit authored by the agent. Credentials, empty or
    oversized text and unknown categories are refused and nothing is written.

    \b
    Examples:
        memsite remember "Deploys go through make release" -c patterns -t release
        git log -1 --format=%B | memsite remember - --category events
    """
    if content is None or content == "-":
        if sys.stdin.isatty() and content is None:
            raise click.UsageError("give CONTENT, or '-' to read it from standard input")
        content = sys.stdin.buffer.read().decode("utf-8", "surrogateescape")
    with ctx.store() as store:
        memory = store.remember(content, category=category, abstract=abstract, overview=overview,
                                tags=tags, source=source, pinned=pinned)
    if as_json:
        click.echo(json.dumps(_as_dict(memory), indent=2, ensure_ascii=False))
    else:
        click.echo(f"Remembered {memory.id} in {memory.category} (commit {memory.commit[:12] if memory.commit else '-'})")


@main.command()
@click.argument("id")
@click.option("--json", "as_json", is_flag=True, help="Print the memory as JSON.")
@pass_context
@_errors_as_messages
def show(ctx: _Context, id: str, as_json: bool) -> None:
    """Show the memory with ID: its fields and full text.

    \b
    Example:
        memsite show 01JD3X4K9Q2W8E5R7T6Y1U3I0P
    """
    with ctx.store() as store:
        memory = store.get(id)
        root = store.root
    if as_json:
        click.echo(json.dumps(_as_dict(memory), indent=2, ensure_ascii=False))
        return
    rows = [
        ("id", memory.id), ("category", memory.category), ("abstract", memory.abstract),
        ("overview", memory.overview), ("agent", memory.agent), ("created", format_time(memory.created)),
        ("updated", format_time(memory.updated)), ("source", memory.source or ""),
        ("tags", ", ".join(memory.tags)), ("recalled", str(memory.active_count)),
        ("pinned", "yes" if memory.pinned else "no"),
        ("path", str(memory.path.relative_to(root)) if memory.path else ""), ("commit", memory.commit or ""),
    ]
    for name, value in rows:
        if value:
            click.echo(f"{name + ':':10} {value}")
    click.echo()
    click.echo(memory.content)


@main.command("list")
@click.option("-c", "--category", help="Only this category (or alias).")
@click.option("--agent", "by_agent", help="Only memories written by this agent.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@pass_context
@_errors_as_messages
def list_(ctx: _Context, category: str | None, by_agent: str | None, as_json: bool) -> None:
    """List memories, oldest first: id, category, agent, date and abstract.

    \b
    Examples:
        memsite list
        memsite list --category cases --agent planner
    """
    with ctx.store() as store:
        memories = store.list(category=category, agent=by_agent)
    if as_json:
        click.echo(json.dumps([_as_dict(m) for m in memories], indent=2, ensure_ascii=False))
        return
    for memory in memories:
        pin = "*" if memory.pinned else " "
        click.echo(f"{memory.id} {pin}{memory.category:<12} {memory.agent:<12} "
                   f"{memory.created:%Y-%m-%d}  {memory.abstract}")
    if not memories:
        click.echo("No memories yet.", err=True)


@main.command()
@click.argument("id")
@click.option("-r", "--reason", default="", help="Why it is forgotten (kept in the commit).")
@pass_context
@_errors_as_messages
def forget(ctx: _Context, id: str, reason: str) -> None:
    """Forget the memory with ID (its file is deleted; git history keeps it).

    \b
    Example:
        memsite forget 01JD3X4K9Q2W8E5R7T6Y1U3I0P --reason "superseded"
    """
    with ctx.store() as store:
        commit = store.forget(id, reason=reason)
    click.echo(f"Forgot {id} (commit {commit[:12]})")


@main.command()
@click.argument("category")
@pass_context
@_errors_as_messages
def trim(ctx: _Context, category: str) -> None:
    """Apply CATEGORY's capacity marks now, trimming the lowest-ranked memories.

    Writes already trim when they overflow a category; this is for after the
    marks in mkdocs.yml were lowered. Pinned memories are never trimmed.

    \b
    Example:
        memsite trim cases
    """
    with ctx.store() as store:
        trimmed = store.trim(category)
    if trimmed:
        click.echo(f"Trimmed {len(trimmed)} memories: {' '.join(trimmed)}")
    else:
        click.echo("Nothing to trim: the category is within its capacity.")


@main.command()
@pass_context
@_errors_as_messages
def check(ctx: _Context) -> None:
    """Check every memory file in the working tree; one line per problem.

    Exits with status 1 when there is any problem: a file that breaks the
    format (named with its field and the fix), a folder that is not a
    category, an id used twice, a category over its capacity.

    \b
    Example:
        memsite check && git push
    """
    from .validate import check_working_tree

    problems, count = check_working_tree(Path(ctx.repo))
    for problem in problems:
        click.echo(problem)
    if problems:
        raise click.exceptions.Exit(1)
    click.echo(f"{count} memories checked, no problems.", err=True)


def _as_dict(memory: Memory) -> dict[str, Any]:
    from .fileformat import memory_fields

    data = memory_fields(memory)
    data["content"] = memory.content
    data["path"] = str(memory.path) if memory.path else None
    data["commit"] = memory.commit
    return data
