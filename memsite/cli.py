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
@click.argument("base")
@click.argument("head", default="HEAD")
@click.option("--json", "as_json", is_flag=True, help="Print the changes as JSON.")
@pass_context
@_errors_as_messages
def diff(ctx: _Context, base: str, head: str, as_json: bool) -> None:
    """Report what changed in memory between BASE and HEAD, for a pull request.

    Memories created, updated (with what changed in text and metadata),
    merged, forgotten and trimmed (with the reason), world-state keys and
    sessions added, per agent and per category; highlights first.

    \b
    Examples:
        memsite diff origin/main
        memsite diff v1.0 HEAD --json
    """
    from .review import compare, markdown

    report = compare(_root(ctx), base, head)
    click.echo(report.to_json() if as_json else markdown(report))


@main.command()
@click.option("--date", "day", type=click.DateTime(["%Y-%m-%d"]), help="The report of this day (YYYY-MM-DD).")
@click.option("--since", type=click.DateTime(["%Y-%m-%d"]), help="One report per day from this day on.")
@click.option("--rev", default="HEAD", show_default=True, help="Report the history up to this revision.")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@pass_context
@_errors_as_messages
def report(ctx: _Context, day: Any, since: Any, rev: str, as_json: bool) -> None:
    """Daily reports from the history: sessions, created / merged / skipped / trimmed, highlights, per agent.

    Without --date or --since: the latest day with activity. Computed from the
    commits, so the same at every clone and at any revision (--rev).

    \b
    Examples:
        memsite report --date 2026-11-20
        memsite report --since 2026-11-01 --json
    """
    from . import history

    if day and since:
        raise click.UsageError("give --date or --since, not both")
    with ctx.store() as store:
        abstracts = {m.id: m.abstract for m in store.list()}
        reports = history.daily(history.read(store.root, rev, store.config.content_dir),
                                store.config.sessions_dir)
    if day:
        reports = [r for r in reports if r.day == day.date()]
    elif since:
        reports = [r for r in reports if r.day >= since.date()]
    else:
        reports = reports[:1]
    if as_json:
        click.echo(json.dumps([{"day": r.day.isoformat(), "commits": r.commits, "sessions": r.sessions,
                                "counts": dict(r.counts), "created": r.highlights,
                                "agents": {a: dict(c) for a, c in r.agents.items()}} for r in reports], indent=2))
        return
    for r in reports[::-1]:
        click.echo(history.render_day(r, lambda mid: abstracts.get(mid, f"{mid} (no longer in memory)"), str))
    if not reports:
        click.echo("No activity on that day." if day else "No activity yet.", err=True)


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


class _IngestProgress:
    """Shows extraction, then a bar over the candidates being stored."""

    def __init__(self) -> None:
        self._bar: Any = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage == "extracting":
            click.echo("Extracting memories from the conversation...", err=True)
            return
        if self._bar is None:
            self._bar = click.progressbar(length=max(total, 1), label="Storing memories", file=sys.stderr)
            self._bar.__enter__()
        self._bar.update(done - self._bar.pos)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


def _extractor(store: MemoryStore, required: bool) -> Any:
    from .extract import Extractor
    from .llm import OpenAICompatible

    llm = OpenAICompatible.from_env()
    if llm is None:
        if required:
            raise MemsiteError("no LLM configured to extract memories with: set MEMSITE_LLM_BASE_URL and "
                               "MEMSITE_LLM_MODEL (and MEMSITE_LLM_API_KEY if the endpoint needs one)")
        return None
    return Extractor(llm, config=store.config)


def _echo_stats(key: str, stats: dict[str, int]) -> None:
    click.echo(f"{key}: {stats['created']} created, {stats['merged']} merged, {stats['skipped']} skipped"
               + (f", {stats['refused']} refused" if stats.get("refused") else ""))


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--session-key", help="Names the checkpoint (default: derived from the conversation).")
@pass_context
@_errors_as_messages
def ingest(ctx: _Context, file: str, session_key: str | None) -> None:
    """Turn a conversation into memories through an LLM, resumably.

    FILE is JSON: a list of {"role", "content"} messages, or an object with
    them under "messages" ('-' reads stdin). The LLM is the OpenAI-compatible
    endpoint in MEMSITE_LLM_BASE_URL / MEMSITE_LLM_MODEL / MEMSITE_LLM_API_KEY.
    If interrupted, 'memsite resume' finishes the work without asking the
    LLM again; running the same command again does the same.

    \b
    Example:
        memsite ingest chat.json --session-key run-42
    """
    messages = _read_conversation(file)
    with ctx.store() as store:
        progress = _IngestProgress()
        try:
            stats = store.ingest(messages, _extractor(store, required=True), session_key, progress=progress)
        except KeyboardInterrupt:
            progress.close()
            click.echo("Interrupted: nothing is lost; 'memsite resume --all' finishes the ingest.", err=True)
            raise
        finally:
            progress.close()
    _echo_stats(session_key or "ingest", stats)


def _read_conversation(file: str) -> Any:
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MemsiteError(f"{file}: cannot read it ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MemsiteError(f"{file}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if isinstance(data, dict):
        data = data.get("messages")
    if not isinstance(data, list):
        raise MemsiteError(f"{file}: expected a list of messages or an object with a 'messages' list")
    return data


@main.command()
@click.argument("key", required=False)
@click.option("--all", "resume_all", is_flag=True, help="Resume every unfinished ingest.")
@pass_context
@_errors_as_messages
def resume(ctx: _Context, key: str | None, resume_all: bool) -> None:
    """Finish interrupted ingests (without KEY or --all: list them).

    \b
    Examples:
        memsite resume
        memsite resume run-42
        memsite resume --all
    """
    with ctx.store() as store:
        keys = store.incomplete_ingests() if resume_all or key is None else [key]
        if key is None and not resume_all:
            for waiting in keys:
                click.echo(waiting)
            if not keys:
                click.echo("No unfinished ingests.", err=True)
            return
        extractor = _extractor(store, required=False)
        for waiting in keys:
            progress = _IngestProgress()
            try:
                stats = store.resume(waiting, extractor, progress=progress)
            finally:
                progress.close()
            _echo_stats(waiting, stats)


@main.command()
@click.option("--threshold", default=5, show_default=True, type=click.IntRange(min=1),
              help="Patterns recalled at least this many times.")
@click.option("--write", "folder", type=click.Path(file_okay=False, path_type=Path),
              help="Write each draft to FOLDER/<name>/SKILL.md (never over one a person edited).")
@click.option("--llm/--no-llm", "use_llm", default=True, show_default=True,
              help="Analyse patterns with the LLM in MEMSITE_LLM_* when one is configured.")
@pass_context
@_errors_as_messages
def skills(ctx: _Context, threshold: int, folder: Path | None, use_llm: bool) -> None:
    """List patterns used often enough to become agent skills, or draft them.

    \b
    Examples:
        memsite skills
        memsite skills --threshold 3 --write skills/
    """
    from .llm import OpenAICompatible
    from .skills import write_drafts

    llm = OpenAICompatible.from_env() if use_llm else None
    with ctx.store() as store:
        found = store.skill_candidates(threshold=threshold, llm=llm)
    if folder is None:
        for c in found:
            click.echo(f"{c.name}  {c.confidence:.0%}  recalled {c.recalls}x  from {c.source_pattern_id}  "
                       f"{c.description}")
    else:
        for _, path, status in write_drafts(found, folder):
            click.echo(f"{status:<9} {path}" + ("  (edited by a person: left alone)" if status == "kept" else ""))
    if not found:
        click.echo(f"No pattern has been recalled {threshold} times yet.", err=True)


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


@main.command()
@click.option("-d", "--site-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where to write the site (default: site/ beside mkdocs.yml).")
@click.option("--strict", is_flag=True, help="Fail on MkDocs warnings too.")
@pass_context
@_errors_as_messages
def build(ctx: _Context, site_dir: Path | None, strict: bool) -> None:
    """Build the memory website (MkDocs + Material) from the repository.

    \b
    Example:
        memsite build --site-dir public/
    """
    from .site.build import build as build_site

    out = build_site(_root(ctx), site_dir, strict=strict)
    click.echo(f"Built the site into {out}; open {out / 'index.html'}")


@main.command()
@click.option("-a", "--dev-addr", metavar="IP:PORT", help="Address to serve on (default: 127.0.0.1:8000).")
@click.option("--open", "open_in_browser", is_flag=True, help="Open the site in a browser.")
@pass_context
@_errors_as_messages
def serve(ctx: _Context, dev_addr: str | None, open_in_browser: bool) -> None:
    """Serve the memory website locally, rebuilding it as memories change.

    \b
    Example:
        memsite serve --dev-addr 127.0.0.1:8001
    """
    from .site.build import serve as serve_site

    serve_site(_root(ctx), dev_addr, open_in_browser=open_in_browser)


@main.command()
@click.option("-o", "--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder to write the Markdown files into.")
@click.option("--no-l1", is_flag=True, help="Leave out the overviews (L1): abstracts only.")
@click.option("--by-category", is_flag=True, help="Also write by-category/<category>.md.")
@pass_context
@_errors_as_messages
def project(ctx: _Context, out: Path, no_l1: bool, by_category: bool) -> None:
    """Write daily summaries (and category views) as Markdown for external indexers.

    \b
    Example:
        memsite project --out qmd/ --by-category
    """
    from .site.build import project as write_projection

    files = write_projection(_root(ctx), out, include_l1=not no_l1, by_category=by_category)
    click.echo(f"Wrote {len(files)} files into {out}")


@main.command()
@click.argument("folder", default="memsite-demo", type=click.Path(file_okay=False, path_type=Path))
@click.option("--serve", "and_serve", is_flag=True, help="Serve the site afterwards (127.0.0.1:8000).")
@click.option("--weeks", default=6, show_default=True, type=click.IntRange(1, 52), help="Weeks to simulate.")
@_errors_as_messages
def demo(folder: Path, and_serve: bool, weeks: int) -> None:
    """Create a demo memory repository and build its website.

    Three agents work through the Python API over several simulated weeks
    (memories in every category, tasks and sessions, world-state merges,
    recalls, trims, a pattern hot enough to become a skill draft); the site
    is built into FOLDER/site.

    \b
    Example:
        memsite demo /tmp/memsite-demo --serve
    """
    from .demo import create
    from .site.build import build as build_site
    from .site.build import serve as serve_site

    def report(message: str) -> None:
        click.echo(message, err=True)

    create(folder, weeks=weeks, progress=report)
    out = build_site(folder)
    click.echo(f"Demo repository: {folder.resolve()}\nSite: {(out / 'index.html').resolve()}")
    if and_serve:
        click.echo("Serving on http://127.0.0.1:8000/ (Ctrl-C stops)", err=True)
        serve_site(folder)


def _root(ctx: _Context) -> Path:
    from .store.repo import Repository

    repo = Repository(ctx.repo)
    try:
        return repo.root
    finally:
        repo.close()


@main.command()
@click.option("--remote", default="origin", show_default=True, help="The git remote to share memory through.")
@click.option("--branch", help="The remote branch (default: the checked-out branch's name).")
@pass_context
@_errors_as_messages
def sync(ctx: _Context, remote: str, branch: str | None) -> None:
    """Merge the remote's memory into this clone's with memsite's merge drivers, and push.

    A push rejected because someone pushed first is retried; nothing is ever
    force-pushed and no local commit is dropped.

    \b
    Example:
        memsite sync --remote origin
    """
    from .sync import sync as sync_memory

    with ctx.store() as store:
        result = sync_memory(store, remote, branch)
    click.echo(f"Synced with {result.remote}/{result.branch}: {result.fetched} commits fetched, "
               f"{result.pushed} pushed")


@main.command()
@click.option("--remote", default="origin", show_default=True, help="The git remote to push the branch to.")
@click.option("--base", default="main", show_default=True, help="The branch the pull request goes into.")
@pass_context
@_errors_as_messages
def propose(ctx: _Context, remote: str, base: str) -> None:
    """Push this agent's branch (agent/<name>) and print the pull request body.

    \b
    Example:
        memsite --agent coder propose | gh pr create --base main --head agent/coder --body-file -
    """
    from .sync import propose as propose_branch

    with ctx.store() as store:
        branch, body = propose_branch(store, remote, base)
    click.echo(f"Pushed {branch} to {remote}; open a pull request into {base} with this body:", err=True)
    click.echo(body)


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
