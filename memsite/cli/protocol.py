"""Commands of the task protocol and the shared world state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..features.protocol import reworded
from ..foundation.errors import MemsiteError
from .common import Context, MemsiteGroup, echo, echo_json, json_option, main, pass_context, read_stdin

# The protocol's errors name the Python calls; from a shell, name the commands and options.
_CLI_WORDS = (
    ("resume it with store.task() or 'memsite task show'", "see it with 'memsite task show'"),
    ("close it with task.abandon(reason)", "close it with 'memsite task abandon REASON'"),
    ("store.task(type, keywords)", "'memsite task start TYPE KEYWORDS...'"),
    ("store.task(...)", "'memsite task start TYPE KEYWORDS...'"),
    ("call task.problem(...) and task.solution(...)", "give --problem and --solution"),
    ("call task.problem(...)", "give --problem"), ("call task.solution(...)", "give --solution"),
)


class ShellWords(MemsiteGroup):
    """The task commands: a protocol error is one line in the words of the command line."""

    def message(self, error: MemsiteError) -> str:
        return reworded(str(error), _CLI_WORDS)


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
@json_option("the keys and values")
@pass_context
def world_show(ctx: Context, key: str | None, as_json: bool) -> None:
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
        echo(values[key])
    elif as_json:
        echo_json(values)
    else:
        for name, value in values.items():
            echo(f"{name}: {value}" if "\n" not in value else f"{name}:\n  " + value.replace("\n", "\n  "))
        if not values:
            echo("No world state yet ('memsite world set KEY VALUE' adds a key).", err=True)


@world.command("set")
@click.argument("words", nargs=-1, required=True, metavar="KEY=VALUE... | KEY VALUE")
@pass_context
def world_set(ctx: Context, words: tuple[str, ...]) -> None:
    """Set keys, as KEY=VALUE pairs (one commit) or as KEY VALUE ('-' reads
    VALUE from standard input); every other key is kept.

    \b
    Examples:
        memsite world set ci.status=green deploy.target=staging
        memsite world set ci.status green
        git log -1 --format=%B | memsite world set release.notes -
    """
    pairs = "=" in words[0]  # (a key holds no '=')
    if not pairs and len(words) != 2:
        raise click.ClickException(f"world set {' '.join(map(repr, words))}: expected KEY VALUE or KEY=VALUE pairs "
                                   "(quote a value that has spaces)")
    updates = _world_pairs(words) if pairs else {words[0]: words[1]}
    with ctx.store() as store:
        if not pairs and words[1] == "-":
            updates[words[0]] = read_stdin(store.config.max_world_bytes, "max_world_bytes",
                                           "keep large text in a memory and refer to it")
        commit = store.world.merge(updates)
    keys = ", ".join(updates)
    echo(f"Set {keys} (commit {commit[:12]})" if commit else
         f"{keys} already had {'that value' if len(updates) == 1 else 'those values'}")


def _world_pairs(words: tuple[str, ...]) -> dict[str, str]:
    """KEY=VALUE words as a mapping (a key cannot hold '=', so the first one ends it)."""
    pairs: dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep:
            raise click.ClickException(f"{word!r}: expected KEY=VALUE (give every key as KEY=VALUE, or one KEY VALUE)")
        if key in pairs:
            raise click.ClickException(f"{key!r}: given twice; give each key once")
        pairs[key] = value
    return pairs


@world.command("unset")
@click.argument("keys", nargs=-1, required=True)
@pass_context
def world_unset(ctx: Context, keys: tuple[str, ...]) -> None:
    """Remove KEYS from the world state (keys that do not exist are named, and left alone).

    \b
    Example:
        memsite world unset old.key deploy.previous
    """
    with ctx.store() as store:
        before = store.world.read()
        commit = store.world.merge(remove=keys)
    absent = [key for key in dict.fromkeys(keys) if key not in before]
    removed = [key for key in dict.fromkeys(keys) if key in before]
    missing = f"no world key {', '.join(absent)}" + ("; 'memsite world show' lists them" if not removed else "")
    if commit and removed:
        echo(f"Removed {', '.join(removed)} (commit {commit[:12]})" + (f"; {missing}" if absent else ""))
    else:
        echo(f"Nothing removed: {missing}" if absent else "Nothing to remove")


@main.group(cls=ShellWords)
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


def _show_task(t: Any, resumed: bool = False) -> None:
    echo(f"{t.type}: {', '.join(t.keywords) or '(no keywords)'} (round {t.rounds})" + (" [resumed]" if resumed else ""))
    for text, done, note in t.todo:
        echo(f"- [{'x' if done else ' '}] {text}" + (f" ({note})" if note else ""))
    for pattern in t.known_patterns:
        echo(f"known pattern: {pattern}")


@task.command("start")
@click.argument("type")
@click.argument("keywords", nargs=-1)
@click.option("--plan", "plan", multiple=True, help="A TODO item; repeat for several.")
@pass_context
def task_start(ctx: Context, type: str, keywords: tuple[str, ...], plan: tuple[str, ...]) -> None:
    """Start a task of TYPE about KEYWORDS (or resume the same unfinished one).

    \b
    Example:
        memsite --agent fixer task start debug "undefined var" add --plan "find the cause"
    """
    with ctx.store() as store:
        t = store.task(type, keywords, plan=plan or None)
        try:
            _show_task(t, resumed=t.resumed)  # (every other task command picks the task up: that is no resume)
        finally:
            t.release()


def _open_task(ctx: Context, action: Callable[[Any], object]) -> None:
    with ctx.store() as store:
        t = store.task()
        try:
            said = action(t)
        finally:
            t.release()
    if said:
        echo(said)


def _progress(t: Any) -> str:
    done = sum(1 for _, finished, _ in t.todo if finished)
    return f"{done} of {len(t.todo)} done"


@task.command("show")
@pass_context
def task_show(ctx: Context) -> None:
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
def task_check(ctx: Context, item: str, note: str | None) -> None:
    """Mark the TODO ITEM done.

    \b
    Example:
        memsite --agent fixer task check "find the cause" --note "NameError in add()"
    """
    def check(t: Any) -> str:
        t.check(item, note=note)
        return f"Checked {item!r} ({_progress(t)})"

    _open_task(ctx, check)


@task.command("add")
@click.argument("item")
@pass_context
def task_add(ctx: Context, item: str) -> None:
    """Add ITEM to the TODO.

    \b
    Example:
        memsite --agent fixer task add "write a regression test"
    """
    def add(t: Any) -> str:
        t.add(item)
        return f"Added {item!r} to the plan ({_progress(t)})"

    _open_task(ctx, add)


@task.command("drop")
@click.argument("item")
@pass_context
def task_drop(ctx: Context, item: str) -> None:
    """Remove ITEM from the TODO (it turned out not to be needed).

    \b
    Example:
        memsite --agent fixer task drop "bisect the history"
    """
    def drop(t: Any) -> str:
        t.drop(item)
        return f"Dropped {item!r} from the plan ({_progress(t)})"

    _open_task(ctx, drop)


@task.command("round")
@pass_context
def task_round(ctx: Context) -> None:
    """Count one more round of work on the task.

    \b
    Example:
        memsite --agent fixer task round
    """

    def bump(t: Any) -> str:
        t.rounds += 1
        return f"Round {t.rounds} of {t.type}: {', '.join(t.keywords) or '(no keywords)'}"

    _open_task(ctx, bump)


@task.command("finish")
@click.option("--problem", help="The problem the task addressed.")
@click.option("--solution", help="How it was solved.")
@click.option("--learn", "learnings", multiple=True, help="A learning ('pattern: ...' goes to knowledge); repeat.")
@click.option("--world", "world_pairs", multiple=True, help="KEY=VALUE to merge into the world state; repeat.")
@click.option("--unset", "unset", multiple=True, help="A world key to remove; repeat.")
@click.option("--force", is_flag=True, help="Close it although plan items are not checked: the outcome is partial.")
@pass_context
def task_finish(ctx: Context, problem: str | None, solution: str | None, learnings: tuple[str, ...],
                world_pairs: tuple[str, ...], unset: tuple[str, ...], force: bool) -> None:
    """Close the task: session record, knowledge, world state, cleared TODO, one commit.

    The session records the outcome succeeded, or partial when plan items
    are not checked: then it asks for --force first, as a session record is
    never changed once written.

    \b
    Example:
        memsite --agent fixer task finish --problem "add() failed" --solution "defined x" --world ci.status=green
    """
    updates = _world_pairs(world_pairs)
    with ctx.store() as store:
        t = store.task()
        try:
            unchecked = [text for text, done, _ in t.todo if not done]
            if unchecked and not force:
                raise click.ClickException(
                    f"the plan has {len(unchecked)} item(s) not checked: {', '.join(map(repr, unchecked))}; check "
                    "them ('memsite task check ITEM'), drop them ('memsite task drop ITEM') or give --force to "
                    "record the task as partial; the task stays open, nothing was committed")
            if problem is not None:
                t.problem(problem)
            if solution is not None:
                t.solution(solution)
            for learning in learnings:
                t.learn(learning)
            if updates or unset:
                t.world(updates, remove=unset)
            commit = t.finish()
        finally:
            t.release()
    echo(f"Closed {t.session}{' as partial' if unchecked else ''} (commit {commit[:12]})")


@task.command("abandon")
@click.argument("reason")
@pass_context
def task_abandon(ctx: Context, reason: str) -> None:
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
    echo(f"Abandoned {t.session} (commit {commit[:12]})")
