"""What every ``memsite`` command shares: the group, its context, errors as one line, progress."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ..api import MemoryStore, root_of
from ..foundation.errors import MemsiteError
from ..foundation.inputs import read_capped
from ..foundation.record import Memory, short_id
from ..foundation.terminal import json_text, safe

F = TypeVar("F", bound=Callable[..., Any])
# Every number a command takes has bounds, so none reaches SQLite or git as an overflow.
COUNT = click.IntRange(1, 1_000_000)
LINES = click.IntRange(0, 1_000_000)


def echo(message: object = "", *, err: bool = False, nl: bool = True) -> None:
    """``click.echo`` for text that may hold memory text: control characters and bidi overrides escaped."""
    click.echo(safe(message), err=err, nl=nl)


def echo_json(data: Any) -> None:
    """Print ``data`` as indented JSON that decodes to exactly it (no raw control or bidi character)."""
    click.echo(json_text(data, indent=2))


class MemsiteGroup(click.Group):
    """The ``memsite`` group, the one place where every command's errors are handled.

    No command shows a traceback unless ``--debug`` asks for it: a
    ``MemsiteError`` is one line on stderr and exit status 1 (:meth:`message`
    words it; a group of commands may reword it for the shell), any other
    exception one line naming it, with the hint to rerun with ``--debug``;
    Ctrl-C is click's 'Aborted!'. The group's options are also taken after a
    command (``memsite remember x --agent a``), unless the command has an
    option of the same name.
    """

    group_class = type  # its groups (world, task, index) are MemsiteGroups too

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        super().add_command(cmd, name)
        taken = {opt for param in cmd.params for opt in param.opts + param.secondary_opts}
        for option in _global_options():
            option.opts = [opt for opt in option.opts if opt not in taken]
            if option.opts:
                cmd.params.append(option)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except MemsiteError as exc:
            raise click.ClickException(safe(self.message(exc))) from None
        except Exception as exc:
            chosen = ctx.find_object(Context)
            if chosen is not None and chosen.debug:
                raise
            message = safe(" ".join(str(exc).split()), multiline=False)[:500]
            raise click.ClickException(f"unexpected {type(exc).__name__}: {message or '(no message)'}; "
                                       "rerun with --debug for the traceback") from None

    def message(self, error: MemsiteError) -> str:
        """What the user reads for ``error`` (its message; a group may put it in the words of the shell)."""
        return str(error)


class Context:
    """What the group's options chose: the repository and the agent; opens the store."""

    def __init__(self, repo: str, agent: str | None, debug: bool = False) -> None:
        self.repo = repo
        self.agent = agent
        self.debug = debug

    def store(self) -> MemoryStore:
        return self.opened(MemoryStore(self.repo, agent=self.agent, progress=ProgressBar()))

    def opened(self, store: MemoryStore) -> MemoryStore:
        """``store``, having said which name it writes as when that is not the one given ('Team Lead')."""
        if self.agent is not None and store.agent != self.agent:
            echo(f"writing as {store.agent}", err=True)
        return store


def json_option(what: str) -> Callable[[F], F]:
    """``--json``, as every command that prints data takes it: ``what`` the JSON holds ("the hits")."""
    return click.option("--json", "as_json", is_flag=True, help=f"Print {what} as JSON.")


def by_option(func: F) -> F:
    """``--by NAME``: only memories written by that agent (``--agent`` says who writes, everywhere)."""
    return click.option("--by", "by_agent", metavar="AGENT", help="Only memories written by this agent.")(func)


def category_option(func: F) -> F:
    """``-c/--category``: only one category (a filter; ``remember`` takes the category it writes to)."""
    return click.option("-c", "--category", help="Only this category (or alias).")(func)


def superseded_option(func: F) -> F:
    """``--all``: memories replaced by another too."""
    return click.option("--all", "include_superseded", is_flag=True,
                        help="Also memories replaced by another (marked 'superseded').")(func)


def as_of_option(what: str) -> Callable[[F], F]:
    """``--as-of WHEN``: ``what`` as it stood at a past moment."""
    return click.option("--as-of", "as_of", metavar="WHEN",
                        help=f"{what} (2026-03-01: the end of that day, or an ISO time).")


def _global_options() -> list[click.Option]:
    """The group's options as a command takes them after its name; each sets what the group's would have."""
    def setter(field: str) -> Callable[[click.Context, click.Parameter, Any], None]:
        def set_field(ctx: click.Context, param: click.Parameter, value: Any) -> None:
            chosen = ctx.find_object(Context)  # (the group made it before this command parses)
            if chosen is not None and value is not None and value is not False and not ctx.resilient_parsing:
                setattr(chosen, field, value)
        return set_field

    return [
        click.Option(["-C", "--repo"], expose_value=False, callback=setter("repo"),
                     help="The memory repository (as before the command)."),
        click.Option(["--agent"], expose_value=False, callback=setter("agent"),
                     help="Who writes (as before the command)."),
        click.Option(["--debug"], is_flag=True, expose_value=False, callback=setter("debug"),
                     help="Show the traceback of an unexpected error."),
        click.Option(["--version"], is_flag=True, expose_value=False, is_eager=True, hidden=True,
                     callback=lambda ctx, param, value: _print_version(ctx) if value else None),
    ]


def _print_version(ctx: click.Context) -> None:
    root = ctx.find_root()
    version = next(p for p in root.command.params if p.name == "version")
    assert version.callback is not None
    version.callback(root, version, True)


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


@click.group(cls=MemsiteGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "--repo", default=".", envvar="MEMSITE_DIR", show_envvar=True,
              help="The memory repository (default: the current folder).")
@click.option("--agent", envvar="MEMSITE_AGENT", show_envvar=True,
              help="Who writes: the commit author (default: the clone's memsite.agent, which 'memsite clone' "
                   "sets; else git's user.name as a slug, 'Ada Lovelace' -> ada-lovelace; else 'human'). A name "
                   "given is made a slug too.")
@click.option("--debug", is_flag=True, help="Show the traceback of an unexpected error.")
@click.version_option(package_name="memsite")
@click.pass_context
def main(ctx: click.Context, repo: str, agent: str | None, debug: bool) -> None:
    """Agent memory in a git repository: written through an API, read as a
    website, reviewed as pull requests.

    -C, --agent and --debug may also follow the command. An ID may be given
    by its short form (the 6 characters lists show: the end of the id, as
    its file name ends), or by its first or last characters (6 or more, any
    case) when only one id starts or ends with them.

    \b
    Quick start:
        memsite init my-memory
        cd my-memory
        memsite remember "User prefers tabs over spaces" --category preferences
        memsite list
    """
    ctx.obj = Context(repo, agent, debug)


def read_stdin(max_bytes: int, setting: str, fix: str) -> str:
    """Standard input as text, read no further than ``max_bytes`` + 1 bytes (refused past the cap, naming
    ``setting``). Bytes that are not UTF-8 are kept as lone surrogates, which the checks of the text name."""
    data = read_capped(sys.stdin.buffer, "standard input", max_bytes=max_bytes, setting=setting, fix=fix)
    return data.decode("utf-8", "surrogateescape")


def repo_root(ctx: Context) -> Path:
    """The working tree's top folder (for commands that need no store)."""
    return root_of(ctx.repo)


def as_dict(memory: Memory) -> dict[str, Any]:
    """A memory as the JSON the commands print: its frontmatter, content, path and commit."""
    from ..foundation.fileformat import memory_fields

    data = memory_fields(memory)
    data["short_id"] = short_id(memory.id)
    data["content"] = memory.content
    data["path"] = str(memory.path) if memory.path else None
    data["commit"] = memory.commit
    return data
