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
from .merge import DRIVERS
from .merge import run as run_merge
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
        return MemoryStore(self.repo, agent=self.agent, progress=_ProgressBar())


class _ProgressBar:
    """Shows a bar on stderr while the index is rebuilt, when that is long enough to wait for."""

    def __init__(self) -> None:
        self._bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None and total >= 1000:
            self._bar = click.progressbar(length=total, label="Indexing memories", file=sys.stderr)
            self._bar.__enter__()
        if self._bar is not None:
            self._bar.update(done - self._bar.pos)
            if done >= total:
                self._bar.__exit__(None, None, None)
                self._bar = None


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
@click.option("--base", help="Also check the changes since this revision (e.g. origin/main in a PR).")
@pass_context
@_errors_as_messages
def check(ctx: _Context, base: str | None) -> None:
    """Check the memory repository; one line per problem.

    Exits with status 1 when there is any problem: a file that breaks the
    format (named with its field and the fix), a folder that is not a
    category, an id used twice, a category over its capacity, a world state
    that cannot be read or holds conflict markers. With --base, also any
    session record changed or deleted since BASE (the event log is
    append-only).

    \b
    Example:
        memsite check --base origin/main && git push
    """
    from .validate import check_working_tree

    problems, count = check_working_tree(Path(ctx.repo), base=base)
    for problem in problems:
        click.echo(problem)
    if problems:
        raise click.exceptions.Exit(1)
    click.echo(f"{count} memories checked, no problems.", err=True)


@main.command()
@click.argument("query")
@click.option("-n", "--limit", default=5, show_default=True, type=click.IntRange(min=1), help="At most this many.")
@click.option("-c", "--category", help="Only this category (or alias).")
@click.option("-t", "--tag", "tags", multiple=True, help="Only memories with this tag; repeat for several.")
@click.option("--by", "by_agent", help="Only memories written by this agent.")
@click.option("--min-score", default=0.0, show_default=True, type=float, help="Drop hits scoring below this.")
@click.option("--json", "as_json", is_flag=True, help="Print the hits with their score parts as JSON.")
@pass_context
@_errors_as_messages
def recall(ctx: _Context, query: str, limit: int, category: str | None, tags: tuple[str, ...],
           by_agent: str | None, min_score: float, as_json: bool) -> None:
    """Recall the memories that best match QUERY (relevance x decay x boost).

    Each memory recalled counts as used: its recall count goes up (journaled,
    committed in batches).

    \b
    Examples:
        memsite recall "how do we deploy to staging"
        memsite recall tabs --category preferences --json
    """
    with ctx.store() as store:
        hits = store.recall(query, limit=limit, category=category, tags=tags, agent=by_agent, min_score=min_score)
    _print_hits(hits, as_json)


@main.command()
@click.option("-n", "--limit", type=click.IntRange(min=1), help="Only the best this many.")
@click.option("-c", "--category", help="Only this category (or alias).")
@click.option("--json", "as_json", is_flag=True, help="Print the ranking with score parts as JSON.")
@pass_context
@_errors_as_messages
def rank(ctx: _Context, limit: int | None, category: str | None, as_json: bool) -> None:
    """Rank memories by decay x boost, the order the site shows (nothing is recalled).

    \b
    Example:
        memsite rank --limit 20
    """
    with ctx.store() as store:
        hits = store.rank(limit=limit, category=category)
    _print_hits(hits, as_json)


def _print_hits(hits: list[Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps([{**_as_dict(h.memory), "relevance": h.relevance, "decay": h.decay,
                                "boost": h.boost, "score": h.score} for h in hits], indent=2, ensure_ascii=False))
        return
    for h in hits:
        click.echo(f"{h.score:6.3f}  {h.memory.id} {h.memory.category:<12} {h.memory.abstract}")
    if not hits:
        click.echo("No memories match.", err=True)


@main.command()
@pass_context
@_errors_as_messages
def flush(ctx: _Context) -> None:
    """Commit the recall counts waiting in the activity journal, in one commit.

    \b
    Example:
        memsite flush
    """
    with ctx.store() as store:
        commit = store.flush_activity()
    click.echo(f"Committed recall counts (commit {commit[:12]})" if commit else "No recalls waiting.")


@main.group()
def index() -> None:
    """The search index in .memsite/ (derived from the files; safe to delete).

    \b
    Example:
        memsite index rebuild
    """


@index.command("rebuild")
@pass_context
@_errors_as_messages
def index_rebuild(ctx: _Context) -> None:
    """Rebuild the catalog and full-text index from the memory files.

    \b
    Example:
        memsite index rebuild
    """
    import time

    started = time.perf_counter()
    with ctx.store() as store:
        count = store.rebuild_index()
    seconds = time.perf_counter() - started
    click.echo(f"Indexed {count} memories in {seconds:.1f} s")


@main.group()
def world() -> None:
    """The shared world state: keyed facts every agent sees.

    \b
    Examples:
        memsite world show
        memsite world set deploy.target staging
        memsite world unset old.key
    """


@world.command("show")
@click.argument("key", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the keys and values as JSON.")
@pass_context
@_errors_as_messages
def world_show(ctx: _Context, key: str | None, as_json: bool) -> None:
    """Show the world state, or the value of KEY.

    \b
    Example:
        memsite world show ci.status
    """
    with ctx.store() as store:
        values = store.world.read()
    if key is not None:
        if key not in values:
            raise click.ClickException(f"no world key {key!r}; 'memsite world show' lists them")
        click.echo(values[key])
    elif as_json:
        click.echo(json.dumps(values, indent=2, ensure_ascii=False))
    else:
        for name, value in values.items():
            click.echo(f"{name}: {value}" if "\n" not in value else f"{name}:\n  " + value.replace("\n", "\n  "))


@world.command("set")
@click.argument("key")
@click.argument("value")
@pass_context
@_errors_as_messages
def world_set(ctx: _Context, key: str, value: str) -> None:
    """Set KEY to VALUE ('-' reads it from standard input); every other key is kept.

    \b
    Example:
        memsite world set ci.status green
    """
    if value == "-":
        value = sys.stdin.read()
    with ctx.store() as store:
        commit = store.world.merge({key: value})
    click.echo(f"Set {key} (commit {commit[:12]})" if commit else f"{key} already had that value")


@world.command("unset")
@click.argument("keys", nargs=-1, required=True)
@pass_context
@_errors_as_messages
def world_unset(ctx: _Context, keys: tuple[str, ...]) -> None:
    """Remove KEYS from the world state (keys that do not exist are ignored).

    \b
    Example:
        memsite world unset old.key deploy.previous
    """
    with ctx.store() as store:
        commit = store.world.merge(remove=keys)
    click.echo(f"Removed {', '.join(keys)} (commit {commit[:12]})" if commit else "Nothing to remove")


@main.command()
@click.option("--lines", type=click.IntRange(min=0), help="At most this many lines (default: auto_load_lines).")
@pass_context
@_errors_as_messages
def core(ctx: _Context, lines: int | None) -> None:
    """Print the core memory an agent loads at start: world state, pinned
    memories and this agent's recent memories.

    \b
    Example:
        memsite --agent planner core --lines 50
    """
    with ctx.store() as store:
        click.echo(store.load_core(lines=lines))


@main.group()
def task() -> None:
    """The task protocol for agents that drive memsite from a shell.

    Each command picks up the agent's task from its task_process.md, so they
    can run as separate processes. 'finish' writes the session record, the
    agent's knowledge, the world state and clears the working memory in one
    commit, or commits nothing and lists what is missing.

    \b
    Example:
        memsite --agent fixer task start debug "undefined var" add --plan "find the cause" --plan fix
        memsite --agent fixer task check "find the cause" --note "NameError in add()"
        memsite --agent fixer task finish --problem "add() failed" --solution "defined x" --learn "pattern: ..."
    """


def _show_task(t: Any) -> None:
    click.echo(f"{t.type}: {', '.join(t.keywords) or '(no keywords)'} (round {t.rounds})"
               + (" [resumed]" if t.resumed else ""))
    for text, done, note in t.todo:
        click.echo(f"- [{'x' if done else ' '}] {text}" + (f" ({note})" if note else ""))
    for pattern in t.known_patterns:
        click.echo(f"known pattern: {pattern}")


@task.command("start")
@click.argument("type")
@click.argument("keywords", nargs=-1)
@click.option("--plan", "plan", multiple=True, help="A TODO item; repeat for several.")
@pass_context
@_errors_as_messages
def task_start(ctx: _Context, type: str, keywords: tuple[str, ...], plan: tuple[str, ...]) -> None:
    """Start a task of TYPE about KEYWORDS (or resume the same unfinished one).

    \b
    Example:
        memsite --agent fixer task start debug "undefined var" add --plan "find the cause"
    """
    with ctx.store() as store:
        t = store.task(type, keywords, plan=plan or None)
        try:
            _show_task(t)
        finally:
            t.release()


def _open_task(ctx: _Context, action: Callable[[Any], None]) -> None:
    with ctx.store() as store:
        t = store.task()
        try:
            action(t)
        finally:
            t.release()


@task.command("show")
@pass_context
@_errors_as_messages
def task_show(ctx: _Context) -> None:
    """Show the task in progress: its TODO and the patterns it matched.

    \b
    Example:
        memsite --agent fixer task show
    """
    _open_task(ctx, _show_task)


@task.command("check")
@click.argument("item")
@click.option("--note", help="What was found.")
@pass_context
@_errors_as_messages
def task_check(ctx: _Context, item: str, note: str | None) -> None:
    """Mark the TODO ITEM done.

    \b
    Example:
        memsite --agent fixer task check "find the cause" --note "NameError in add()"
    """
    _open_task(ctx, lambda t: t.check(item, note=note))


@task.command("add")
@click.argument("item")
@pass_context
@_errors_as_messages
def task_add(ctx: _Context, item: str) -> None:
    """Add ITEM to the TODO.

    \b
    Example:
        memsite --agent fixer task add "write a regression test"
    """
    _open_task(ctx, lambda t: t.add(item))


@task.command("drop")
@click.argument("item")
@pass_context
@_errors_as_messages
def task_drop(ctx: _Context, item: str) -> None:
    """Remove ITEM from the TODO (it turned out not to be needed).

    \b
    Example:
        memsite --agent fixer task drop "bisect the history"
    """
    _open_task(ctx, lambda t: t.drop(item))


@task.command("round")
@pass_context
@_errors_as_messages
def task_round(ctx: _Context) -> None:
    """Count one more round of work on the task.

    \b
    Example:
        memsite --agent fixer task round
    """

    def bump(t: Any) -> None:
        t.rounds += 1

    _open_task(ctx, bump)


def _world_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise click.BadParameter(f"{text!r}: expected KEY=VALUE")
    return key, value


@task.command("finish")
@click.option("--problem", help="The problem the task addressed.")
@click.option("--solution", help="How it was solved.")
@click.option("--learn", "learnings", multiple=True, help="A learning ('pattern: ...' goes to knowledge); repeat.")
@click.option("--world", "world_pairs", multiple=True, help="KEY=VALUE to merge into the world state; repeat.")
@click.option("--unset", "unset", multiple=True, help="A world key to remove; repeat.")
@pass_context
@_errors_as_messages
def task_finish(ctx: _Context, problem: str | None, solution: str | None, learnings: tuple[str, ...],
                world_pairs: tuple[str, ...], unset: tuple[str, ...]) -> None:
    """Close the task: session record, knowledge, world state, cleared TODO, one commit.

    \b
    Example:
        memsite --agent fixer task finish --problem "add() failed" --solution "defined x" --world ci.status=green
    """
    with ctx.store() as store:
        t = store.task()
        try:
            if problem is not None:
                t.problem(problem)
            if solution is not None:
                t.solution(solution)
            for learning in learnings:
                t.learn(learning)
            if world_pairs or unset:
                t.world(dict(_world_pair(p) for p in world_pairs), remove=unset)
            commit = t.finish()
        finally:
            t.release()
    click.echo(f"Closed {t.session} (commit {commit[:12]})")


@task.command("abandon")
@click.argument("reason")
@pass_context
@_errors_as_messages
def task_abandon(ctx: _Context, reason: str) -> None:
    """Close the task without finishing it; the session records REASON.

    \b
    Example:
        memsite --agent fixer task abandon "superseded by the new parser"
    """
    with ctx.store() as store:
        t = store.task()
        try:
            commit = t.abandon(reason)
        finally:
            t.release()
    click.echo(f"Abandoned {t.session} (commit {commit[:12]})")


@main.command("merge-driver")
@click.argument("kind", type=click.Choice([d.kind for d in DRIVERS]))
@click.argument("base", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("ours", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("theirs", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("path", required=False, default="")
def merge_driver(kind: str, base: Path, ours: Path, theirs: Path, path: str) -> None:
    """Git merge driver (git runs it; memsite registers it in each clone).

    Merges THEIRS into OURS given BASE, key by key; exits 1 with conflict
    markers only where both sides changed the same key differently.

    \b
    Example (what git runs for world_state.md):
        memsite merge-driver world %O %A %B %P
    """
    raise click.exceptions.Exit(run_merge(kind, base, ours, theirs, path))


def _as_dict(memory: Memory) -> dict[str, Any]:
    from .fileformat import memory_fields

    data = memory_fields(memory)
    data["content"] = memory.content
    data["path"] = str(memory.path) if memory.path else None
    data["commit"] = memory.commit
    return data
