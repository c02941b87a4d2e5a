"""Commands on memories: write, read, recall and rank, review changes, and the search index."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from .. import DayReport
from ..api import MemoryStore
from ..features.purge import MATCHING_WITHOUT_YES
from ..foundation.config import memory_url, site_url
from ..foundation.record import Memory, format_time, short_id
from ..foundation.terminal import json_safe, safe
from .common import (
    COUNT,
    LINES,
    Context,
    ProgressBar,
    as_dict,
    as_of_option,
    by_option,
    category_option,
    echo,
    echo_json,
    json_option,
    main,
    pass_context,
    read_stdin,
    superseded_option,
)


@main.command()
@click.argument("path", default=".", type=click.Path(file_okay=False))
@click.option("--remote", metavar="URL", help="An empty git remote to publish the new memory to (as origin's main).")
@pass_context
def init(ctx: Context, path: str, remote: str | None) -> None:
    """Create a memory repository in PATH (runs git init if needed).

    Writes mkdocs.yml (site and memsite settings, with the categories and how
    to set capacity marks), content/ and .gitignore, and commits them. With
    --remote, pushes it to that empty remote as main (and, for a remote on
    this machine, makes the remote's HEAD name main, so a plain git clone
    checks it out); team-mates then join with 'memsite clone URL'.

    \b
    Examples:
        memsite init my-memory
        memsite --agent planner init my-memory --remote git@github.com:team/memory.git
    """
    with ctx.opened(MemoryStore.init(path, agent=ctx.agent, remote=remote)) as store:
        echo(f"Initialised memory repository in {store.root}")
        if remote is not None:
            echo(f"Published it to {remote} (branch main); join it from another machine with: memsite clone {remote}")
            if store.published:
                echo(f"Still to do: {store.published}", err=True)


@main.command()
@click.argument("url")
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option("--branch", help="The memory's branch on the remote (default: main, else the remote's HEAD).")
@pass_context
def clone(ctx: Context, url: str, directory: str | None, branch: str | None) -> None:
    """Join a team's memory: clone URL into DIRECTORY, ready to recall.

    Checks out the shared branch (main, even when the remote's HEAD names
    another, as a plain 'git init --bare' does), registers the merge drivers,
    keeps --agent as this clone's agent (git config memsite.agent), builds the
    search index and embeds the memories (with a progress bar), then says what
    to do next. An empty remote gets a new memory, published to it. Bad input
    (not a git repository, not a memsite memory, an unreachable host, a folder
    that is not empty) is one line, and nothing is left behind.

    \b
    Examples:
        memsite --agent coder clone git@github.com:team/memory.git
        memsite --agent coder clone /srv/git/memory.git ~/memory
    """
    import time

    started = time.perf_counter()
    with ctx.opened(MemoryStore.clone(url, directory, agent=ctx.agent, branch=branch,
                                      progress=ProgressBar("Making recall ready"))) as store:
        shared, new = store.cloned or ("main", False)
        count = store.count()
        model = store.embedding_model
        root, agent = store.root, store.agent
        branch_of = store.publish_branch()
    how = f"by meaning ({model}) and words" if model else "by words (no embedder installed)"
    if new:
        echo(f"{url} was empty: made a new memory in {root} and published it there (branch main)")
    else:
        echo(f"Cloned {url} into {root}: {count} memories on {shared}, recall {how} ready "
             f"({time.perf_counter() - started:.1f} s)")
    echo(f"This clone writes as {agent}" + (f" and publishes to {branch_of} when it syncs." if branch_of else "."))
    echo("Next:")
    echo(f"  cd {safe(str(root))}")
    echo('  memsite recall "what the team knows about ..."')
    echo('  memsite remember "what you learned" -c patterns && memsite sync')


@main.command()
@click.argument("content", required=False)
@click.option("-c", "--category", default="general", show_default=True,
              help="Category or alias (e.g. preferences, user_pref, cases).")
@click.option("--abstract", help="One-line summary (default: the first line).")
@click.option("--overview", help="Short paragraph (default: the first paragraph).")
@click.option("-t", "--tag", "tags", multiple=True, help="A tag; repeat for several.")
@click.option("--source", help="The session or origin this came from.")
@click.option("--pinned", is_flag=True, help="Exempt from decay and trimming.")
@click.option("--supersedes", metavar="ID",
              help="The memory this one replaces: marked superseded (valid_until, superseded_by) in the same commit.")
@json_option("the memory, with 'action' (created, merged, skipped) and 'duplicate_of',")
@pass_context
def remember(ctx: Context, content: str | None, category: str, abstract: str | None, overview: str | None,
             tags: tuple[str, ...], source: str | None, pinned: bool, supersedes: str | None, as_json: bool) -> None:
    """Remember CONTENT (or standard input when CONTENT is '-' or absent).

    Each memory is one commit authored by the agent. Prints what happened:
    created, merged into an existing near-duplicate (which keeps its id), or
    skipped as an exact duplicate (nothing written). Credentials, empty or
    oversized text and unknown categories are refused and nothing is written.

    With --supersedes ID the new memory replaces that one: the same commit
    marks it superseded; its file stays, and recall leaves it out from then on.

    \b
    Examples:
        memsite remember "Deploys go through make release" -c patterns -t release
        git log -1 --format=%B | memsite remember - --category events
        memsite remember "The user lives in Paris." -c profile --supersedes 01M80RXENR
    """
    if content is None and sys.stdin.isatty():
        raise click.UsageError("give CONTENT, or '-' to read it from standard input")
    with ctx.store() as store:
        if content is None or content == "-":
            content = read_stdin(store.config.max_memory_bytes, "max_memory_bytes", "split it into smaller memories")
        memory = store.remember(content, category=category, abstract=abstract, overview=overview,
                                tags=tags, source=source, pinned=pinned, supersedes=supersedes)
        old = store.get(memory.supersedes) if supersedes and memory.supersedes else None
    action = memory.action or "created"
    if as_json:
        data = as_dict(memory)
        if action == "skipped":
            data["commit"] = None  # nothing was written
        echo_json({**data, "action": action, "duplicate_of": memory.id if action != "created" else None})
    elif action == "skipped":
        echo(f"Skipped: duplicate of {memory.id} in {memory.category}; nothing written")
    elif action == "merged":
        echo(f"Merged into {memory.id} in {memory.category} (commit {memory.commit[:12] if memory.commit else '-'})")
    else:
        replaced = f", superseding {old.id}" + (f" (in {old.category})" if old.category != memory.category else "") \
            if old else ""
        echo(f"Created {memory.id} in {memory.category}{replaced} "
             f"(commit {memory.commit[:12] if memory.commit else '-'})")


@main.command()
@click.argument("old")
@click.argument("new")
@click.option("-r", "--reason", help="Why OLD no longer holds (kept in the commit).")
@pass_context
def supersede(ctx: Context, old: str, new: str, reason: str | None) -> None:
    """Mark the memory OLD replaced by the memory NEW, in one commit.

    For a possible contradiction that 'memsite check' flags, once you have
    confirmed it. OLD gets valid_until (now) and superseded_by; NEW gets
    supersedes. Both files stay; recall, the core memory and the site's
    rankings leave OLD out from then on ('memsite recall --all' shows it).
    Either may be given by its first characters (6 or more).

    \b
    Example:
        memsite supersede 01M80RXENR 01M93KQ2ZT --reason "moved to Paris in June"
    """
    with ctx.store() as store:
        was, now = store.supersede(old, new, reason=reason)
    moved = f" (from {was.category} to {now.category})" if was.category != now.category else ""
    echo(f"Superseded {was.id} by {now.id}{moved} (commit {now.commit[:12] if now.commit else '-'})")


@main.command()
@click.argument("id")
@click.argument("old", required=False)
@pass_context
def dismiss(ctx: Context, id: str, old: str | None) -> None:
    """Say the memory ID contradicts OLD after all not: both hold (one commit).

    'memsite check' lists memories flagged as possible contradictions of
    others when they were written without a language model to judge them.
    Without OLD, every flag of ID is dropped. To confirm one instead:
    'memsite supersede OLD ID'.

    \b
    Example:
        memsite dismiss 01M93KQ2ZT 01M80RXENR
    """
    with ctx.store() as store:
        memory = store.dismiss(id, old)
    commit = memory.commit[:12] if memory.commit else "-"
    echo(f"Dismissed: {memory.id} contradicts {old or 'nothing'} (commit {commit})")


@main.command()
@click.argument("id")
@json_option("the memory")
@click.option("--url", "as_url", is_flag=True,
              help="Print only the address of its page on the site (site_url; else the running 'memsite serve').")
@as_of_option("The memory as it was after the last commit before WHEN")
@pass_context
def show(ctx: Context, id: str, as_json: bool, as_url: bool, as_of: str | None) -> None:
    """Show the memory with ID: its fields and full text.

    ID may be its short form (the 6 characters lists show, as its file name
    ends), or its first or last characters (6 or more) when only one id
    starts or ends with them. A memory that replaced another or was replaced
    ends with its chain, oldest to newest: when each was written, by whom,
    and when it was replaced. With --as-of, the memory as the team knew it then.

    \b
    Example:
        memsite show wgvafw
        memsite show 01M80RXENRH45QMT9FRQWGVAFW --url
        memsite show 01M80RXENR --as-of 2026-03-01
    """
    with ctx.store() as store:
        memory = store.get(id, as_of=as_of)
        root = store.root
        chain = store.chain(memory.id, as_of=as_of)
    if as_url:
        from ..site.build import serving

        base = site_url(root) or serving(root)
        if not base:
            raise click.ClickException(f"{root / 'mkdocs.yml'}: has no site_url and no 'memsite serve' is running "
                                       "here; set site_url to where the site is published (e.g. site_url: "
                                       "https://team.github.io/memory/), or serve it")
        echo(memory_url(base, memory.id))
        return
    if as_json:
        echo_json(as_dict(memory))
        return
    rows = [
        ("id", f"{memory.id} (short: {short_id(memory.id)})"), ("category", memory.category),
        ("abstract", memory.abstract),
        ("overview", memory.overview), ("agent", memory.agent), ("created", format_time(memory.created)),
        ("updated", format_time(memory.updated)), ("source", memory.source or ""),
        ("tags", ", ".join(memory.tags)), ("recalled", str(memory.active_count)),
        ("pinned", "yes" if memory.pinned else "no"),
        ("path", str(memory.path.relative_to(root)) if memory.path else ""), ("commit", memory.commit or ""),
    ]
    if memory.valid_until is not None:
        rows.insert(7, ("until", format_time(memory.valid_until)))  # valid until: it stopped holding then
    for name, value in rows:
        if value:
            echo(f"{name + ':':10} {value}")
    echo()
    echo(memory.content)
    if len(chain) > 1:
        echo()
        echo("Chain, oldest to newest:")
        for line in chain_lines(chain, memory.id):
            echo(safe(line, multiline=False))


@main.command("list")
@category_option
@by_option
@json_option("the memories (a list)")
@pass_context
def list_(ctx: Context, category: str | None, by_agent: str | None, as_json: bool) -> None:
    """List memories, oldest first: id, category, agent, date and abstract.

    \b
    Examples:
        memsite list
        memsite list --category cases --by planner
    """
    with ctx.store() as store:
        memories = store.list(category=category, agent=by_agent)
        total = len(memories) if memories else store.count()
    if as_json:
        echo_json([as_dict(m) for m in memories])
        return
    for memory in memories:
        pin = "*" if memory.pinned else " "
        echo(f"{short_id(memory.id)} {pin}{memory.category:<12} {memory.agent:<12} "
             f"{memory.created:%Y-%m-%d}  {safe(memory.abstract, multiline=False)}")
    if not memories:
        chosen = " and ".join(part for part in (f"in category {category}" if category else "",
                                                f"by agent {by_agent}" if by_agent else "") if part)
        echo(f"No memories {chosen}; the repository has {total} ('memsite list' shows them all)." if total
             else "No memories yet.", err=True)


@main.command()
@click.argument("id")
@click.option("-r", "--reason", default="", help="Why it is forgotten (kept in the commit).")
@pass_context
def forget(ctx: Context, id: str, reason: str) -> None:
    """Forget the memory with ID (its file is deleted; git history keeps it).

    ID may be its first characters (6 or more) when only one id starts with
    them. An id forgotten already is an error saying when, by whom and in
    which commit.

    \b
    Examples:
        memsite forget 01M80RXENRH45QMT9FRQWGVAFW --reason "superseded"
        memsite forget 01M80RXENR
    """
    with ctx.store() as store:
        mid = store.get(id).id
        commit = store.forget(mid, reason=reason)
    echo(f"Forgot {mid} (commit {commit[:12]})")


@main.command()
@click.argument("ids", nargs=-1)
@click.option("-r", "--reason", required=True, help="Why (the tombstone says it; never what was purged).")
@click.option("--matching", metavar="PATTERN", help="Purge every memory whose text, current or past, holds PATTERN.")
@click.option("--dry-run", is_flag=True, help="List every commit, file and message it would change; change nothing.")
@click.option("--yes", is_flag=True, help=f"Purge even when more than {MATCHING_WITHOUT_YES} memories match.")
@click.option("--remote", default="origin", show_default=True,
              help="The remote to push the rewritten branches to, with a lease.")
@pass_context
def purge(ctx: Context, ids: tuple[str, ...], reason: str, matching: str | None, dry_run: bool, yes: bool,
          remote: str) -> None:
    """Erase memories with IDS from history, here and on the remote (forget keeps them in history).

    Rewrites every branch that holds them so that no commit has any version
    of their files or their words in its message; every other file, author
    and date stays as it was. A tombstone commit says that something was
    purged, by whom, when and why. The rewritten branches are pushed with a
    lease; other clones follow on their next sync. Copies out of reach
    (pull-request refs of the hosting service, forks) are in the review guide.

    \b
    Examples:
        memsite purge 01M80RXENRH45QMT9FRQWGVAFW --reason "erasure request 118" --dry-run
        memsite purge --matching "jane.roe@example.com" --reason "erasure request 118" --yes
    """
    with ctx.store() as store:
        if dry_run or (matching is not None and not yes):
            plan = store.purge(*ids, reason=reason, matching=matching, remote=remote, dry_run=True).plan
            if not dry_run and len(plan.ids) > MATCHING_WITHOUT_YES:
                raise click.ClickException(f"{len(plan.ids)} memories hold {matching!r}; check them with "
                                           "--dry-run, then purge them with --yes")
        if dry_run:
            echo(f"would purge {len(plan.ids)} memories: {', '.join(plan.ids)}")
            echo(f"files ({len(plan.paths)}):")
            for path in plan.paths:
                echo(f"  {safe(path, multiline=False)}")
            if plan.vectors:
                echo(f"published vector files that hold their vectors ({len(plan.vectors)}):")
                for path in plan.vectors:
                    echo(f"  {safe(path, multiline=False)}")
            if plan.stashes:
                echo(f"stash entries that hold them, written again in place ({len(plan.stashes)}):")
                for name, sha in plan.stashes.items():
                    echo(f"  {name} {sha[:12]}")
            echo(f"commits rewritten ({len(plan.commits)}), * = message changed:")
            for sha in plan.commits:
                echo(f"  {sha[:12]}{' *' if sha in plan.messages else ''}")
            echo(f"refs: {', '.join(plan.refs)}")
            _kept(plan.elsewhere, matching)
            return
        result = store.purge(*ids, reason=reason, matching=matching, remote=remote)
    pushed = f"; pushed {', '.join(result.pushed)} to {remote}" if result.pushed else ""
    echo(f"purged {len(result.plan.ids)} memories from {len(result.plan.commits)} commits "
         f"(tombstone {(result.tombstone or '')[:12]}){pushed}")
    _kept(result.plan.elsewhere, matching)


def _kept(paths: tuple[str, ...], matching: str | None) -> None:
    """Say where the pattern stays: files that are not memories (world state, sessions, notes), kept as they are."""
    if paths:
        echo(f"{matching!r} is also in files a purge keeps (not memories; edit them, and their history keeps "
             f"earlier versions) ({len(paths)}):")
        for path in paths:
            echo(f"  {safe(path, multiline=False)}")


@main.command()
@click.argument("category")
@pass_context
def trim(ctx: Context, category: str) -> None:
    """Apply CATEGORY's capacity marks now, trimming the lowest-ranked memories.

    Writes already trim when they overflow a category; this is for after the
    marks in mkdocs.yml were lowered. Pinned memories are never trimmed.

    \b
    Example:
        memsite trim cases
    """
    with ctx.store() as store:
        named = store.config.route(category)
        if not named.capacity.bounded:
            raise click.ClickException(
                f"{named.name} has no capacity marks, so it is never trimmed; add 'capacity: "
                f"{{entries: {{high: 200, low: 150}}}}' under plugins.memsite.categories.{named.name} in mkdocs.yml")
        trimmed = store.trim(category)
    if trimmed:
        echo(f"Trimmed {len(trimmed)} memories: {' '.join(trimmed)}")
    else:
        echo(f"Nothing to trim: {named.name} is within its capacity.")


@main.command()
@click.option("--base", help="Also check the changes since this revision (e.g. origin/main in a PR).")
@pass_context
def check(ctx: Context, base: str | None) -> None:
    """Check the memory repository; one line per problem.

    Exits with status 1 when there is any problem: a file that breaks the
    format (named with its field and the fix), a folder that is not a
    category, a memory in another category's folder, an id used twice, a
    category over its capacity, a world state that cannot be read or holds
    conflict markers, a Python tag in mkdocs.yml (it would run code at
    build), a symlink under content/ that leads out of the repository (it
    would publish the host's files). With --base, also any session record
    changed or deleted since BASE (the event log is append-only).

    Warnings do not fail the check: memory files in an earlier layout (flat,
    or month folders without numbered folders) or the wrong month folder
    ('memsite migrate' moves them), hooks or plugins that mkdocs.yml
    adds to the build, and memories flagged as possibly contradicting
    another (confirm with 'memsite supersede OLD NEW', or 'memsite dismiss').

    \b
    Example:
        memsite check --base origin/main && git push
    """
    checked = MemoryStore.check(ctx.repo, base=base)
    for warning in checked.build_warnings:
        echo(f"warning: {warning}", err=True)
    for warning in checked.warnings:
        echo(f"warning: {warning}")
    for problem in checked.problems:
        echo(problem)
    if checked.problems:
        raise click.exceptions.Exit(1)
    warned = " (see the warnings above)" if checked.warnings else ""
    echo(f"{checked.count} memories checked, no problems{warned}.", err=True)


@main.command()
@pass_context
def migrate(ctx: Context) -> None:
    """Move memory files to the numbered folders of their month, all in one commit.

    memsite keeps each memory in content/memories/<category>/<YYYY-MM>/<NNN>/:
    the month it was created, then numbered folders of at most segment_size
    files (500). Repositories written before that have one flat folder per
    category, or month folders without numbered ones (still read, and
    'memsite check' warns about them): this moves those files, and archived
    ones, without changing their text, names or ids; the site's links stay
    the same. The commit names every memory moved (Action: migrated). Run
    again, it finds nothing to do. Interrupted, it leaves the repository as
    it was.

    \b
    Example:
        memsite migrate && memsite check
    """
    with ctx.store() as store:
        done = store.migrate(progress=ProgressBar("Reading memories to move"))
    if done.commit is None:
        click.echo("Nothing to migrate: every memory is in a numbered folder of its month.")
    else:
        archived = f" and {done.archived} archived memories" if done.archived else ""
        click.echo(f"Migrated {done.memories} memories{archived} to numbered folders of their month "
                   f"(commit {done.commit[:12]})")


@main.command()
@click.argument("base")
@click.argument("head", default="HEAD")
@json_option("the changes")
@click.option("--format", "form", type=click.Choice(["text", "markdown"]),
              help="text: as it reads in a terminal; markdown: escaped for a PR comment or job summary "
                   "(default: text on a terminal, markdown when piped).")
@pass_context
def diff(ctx: Context, base: str, head: str, as_json: bool, form: str | None) -> None:
    """Report what changed in memory between BASE and HEAD, for a pull request.

    Memories created, updated (with what changed in text and metadata),
    merged, forgotten and trimmed (with the reason), created then forgotten
    inside the range (with both commits), world-state keys and sessions
    added, per agent and per category; highlights first.

    \b
    Examples:
        memsite diff origin/main
        memsite diff v1.0 HEAD --json
    """
    from ..features.review import markdown

    with ctx.store() as store:
        report = store.diff(base, head)
    if as_json:
        click.echo(json_safe(report.to_json()))
    else:
        echo(markdown(report, terminal=(form or ("text" if sys.stdout.isatty() else "markdown")) == "text"))


@main.command()
@click.option("--date", "day", type=click.DateTime(["%Y-%m-%d"]), help="The report of this day (YYYY-MM-DD).")
@click.option("--since", type=click.DateTime(["%Y-%m-%d"]), help="One report per day from this day on.")
@click.option("--rev", default="HEAD", show_default=True, help="Report the history up to this revision.")
@json_option("the counts")
@pass_context
def report(ctx: Context, day: Any, since: Any, rev: str, as_json: bool) -> None:
    """Daily reports from the history: sessions, created / merged / skipped / trimmed, highlights, per agent.

    Without --date or --since: the latest day with activity. Computed from the
    commits, so the same at every clone and at any revision (--rev).

    \b
    Examples:
        memsite report --date 2026-11-20
        memsite report --since 2026-11-01 --json
    """
    from ..features.history import render_day

    if day and since:
        raise click.UsageError("give --date or --since, not both")
    with ctx.store() as store:
        reports = store.reports(day=day, since=since, rev=rev)
    if as_json:
        echo_json([r.as_dict() for r in reports])
        return
    for r in reports[::-1]:
        echo(render_day(r, _abstract_of(r), str))
    if not reports:
        echo("No activity on that day." if day else "No activity yet.", err=True)



def _abstract_of(report: DayReport) -> Callable[[str], str]:
    """A highlight of ``report`` by its abstract, or by its id once it is no longer in memory."""
    return lambda mid: report.abstracts.get(mid, f"{mid} (no longer in memory)")

@main.command()
@click.argument("query")
@click.option("-n", "--limit", default=5, show_default=True, type=COUNT, help="At most this many.")
@category_option
@click.option("-t", "--tag", "tags", multiple=True, help="Only memories with this tag; repeat for several.")
@by_option
@click.option("--min-score", default=0.0, show_default=True, type=click.FloatRange(min=0),
              help="Drop hits scoring below this.")
@json_option("the hits with their score parts")
@click.option("--since", help="Only memories written since then: 2026-03-01, '2 weeks ago', 'yesterday'.")
@click.option("--until", help="Only memories written until then (a date alone: to its end).")
@click.option("--ranking", type=click.Choice(["relevance", "freshness"]), default="relevance", show_default=True,
              help="relevance: time only orders what is about as relevant; freshness: relevance x decay, newest first.")
@click.option("--explain", is_flag=True,
              help="Show why each hit was kept (meaning, words, the floor), what time took off, and what the floor "
                   "left out; counts nothing.")
@superseded_option
@as_of_option("Memory as it stood then; counts nothing")
@click.option("--record-time", is_flag=True,
              help="With --as-of: what the memory held after the last commit before WHEN (what was believed then).")
@pass_context
def recall(ctx: Context, query: str, limit: int, category: str | None, tags: tuple[str, ...],
           by_agent: str | None, min_score: float, as_json: bool, since: str | None, until: str | None,
           ranking: str, explain: bool, include_superseded: bool, as_of: str | None, record_time: bool) -> None:
    """Recall the memories that best match QUERY: relevance finds them, time orders what is close.

    Each memory recalled counts as used: its recall count goes up (journaled,
    committed in batches). With an embedder, only memories close enough in
    meaning to reach the floor, or holding most of QUERY's words, are recalled.
    Each hit shows the day it was written. Memories replaced by another are
    left out (--all brings them back, marked).

    With --as-of, memory as it stood then, in valid time: the memories written
    by then that still held then, as the repository knows now. With
    --record-time too, in record time: the memories of the last commit before
    then, what the team believed at that moment.

    \b
    Examples:
        memsite recall "how do we deploy to staging"
        memsite recall tabs --category preferences --json
        memsite recall "who owns the ledger" --since "2 weeks ago" --until 2026-03-01
        memsite recall "banana smoothie recipe" --explain
        memsite recall "who is the user's manager" --as-of 2026-03-01
    """
    from ..foundation.text import only_stopwords

    if record_time and as_of is None:
        raise click.UsageError("--record-time needs --as-of")
    asked: dict[str, Any] = dict(limit=limit, category=category, tags=tags, agent=by_agent, min_score=min_score,
                                 since=since, until=until, ranking=ranking, include_superseded=include_superseded)
    with ctx.store() as store:
        if explain:
            if as_of is not None:
                raise click.UsageError("--explain explains recall now; leave out --as-of")
            _print_explained(store.explain(query, **asked), as_json)
            return
        hits = store.recall(query, **asked, as_of=as_of, record_time=record_time)
    if not hits and only_stopwords(query) and not as_json:
        echo(f"No memories match: {safe(query, multiline=False)!r} has only common words (the, and, of ...), which "
             "every memory shares; add a word that says what you look for.", err=True)
        return
    _print_hits(hits, as_json)


@main.command()
@click.option("-n", "--limit", type=COUNT, help="Only the best this many.")
@category_option
@json_option("the ranking with score parts")
@superseded_option
@pass_context
def rank(ctx: Context, limit: int | None, category: str | None, as_json: bool, include_superseded: bool) -> None:
    """Rank memories by decay x boost, the order the site shows (nothing is recalled).

    Memories replaced by another are left out unless --all is given.

    \b
    Example:
        memsite rank --limit 20
    """
    with ctx.store() as store:
        hits = store.rank(limit=limit, category=category, include_superseded=include_superseded)
    _print_hits(hits, as_json)


def _hit_dict(h: Any) -> dict[str, Any]:
    return {**as_dict(h.memory), "relevance": h.relevance, "decay": h.decay, "boost": h.boost,
            "prior": h.prior, "score": h.score}


def _hit_line(h: Any) -> str:
    replaced = (f"  [superseded by {short_id(h.memory.superseded_by)} on {h.memory.valid_until:%Y-%m-%d}]"
                if h.memory.superseded_by and h.memory.valid_until else "")
    return (f"{h.score:6.3f}  {short_id(h.memory.id)} {h.memory.category:<12} {h.memory.created:%Y-%m-%d}  "
            f"{safe(h.memory.abstract, multiline=False)}{replaced}")


def _time_part(h: Any) -> str:
    """What age and recalls did to a hit's relevance."""
    age = f"written {h.memory.created:%Y-%m-%d}, {h.memory.active_count} recalls"
    if h.prior is None:
        return f"{age}: x decay {h.decay:.3f} x boost {h.boost:.2f} -> score {h.score:.3f}"
    return f"{age}: x prior {h.prior:.3f} -> score {h.score:.3f}"


def _print_explained(hits: list[Any], as_json: bool) -> None:
    if as_json:
        echo_json([{**_hit_dict(h), "why": None if h.why is None else {**vars(h.why), "text": str(h.why)}}
                   for h in hits])
        return
    kept = [h for h in hits if h.why is None or h.why.kept]
    for title, group in (("", kept), ("Below the floor (not recalled):", [h for h in hits if h not in kept])):
        if title and group:
            echo(title)
        for h in group:
            echo(_hit_line(h))
            if h.why is not None:
                echo(f"{'':8}{h.why}")
            echo(f"{'':8}{_time_part(h)}")
    if not kept:
        echo("No memories match.", err=True)
    echo("(--explain counts no recall)", err=True)


def _print_hits(hits: list[Any], as_json: bool) -> None:
    if as_json:
        echo_json([_hit_dict(h) for h in hits])
        return
    for h in hits:
        echo(_hit_line(h))
    if not hits:
        echo("No memories match.", err=True)


@main.command()
@pass_context
def flush(ctx: Context) -> None:
    """Commit the recall counts waiting in the activity journal, in one commit.

    \b
    Example:
        memsite flush
    """
    with ctx.store() as store:
        commit = store.flush_activity()
    echo(f"Committed recall counts (commit {commit[:12]})" if commit else "No recalls waiting.")


@main.group()
def index() -> None:
    """The search index in .memsite/ (derived from the files; safe to delete).

    \b
    Example:
        memsite index rebuild
    """


@index.command("rebuild")
@pass_context
def index_rebuild(ctx: Context) -> None:
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
    echo(f"Indexed {count} memories in {seconds:.1f} s")


@index.command("embed")
@click.option("--publish", is_flag=True,
              help="Then commit the vectors the repository lacks under vectors/<model>/, for other clones to read.")
@pass_context
def index_embed(ctx: Context, publish: bool) -> None:
    """Embed the memories recall has no vectors for yet, ahead of the first recall.

    After a bulk import or in a fresh clone, the first recall by meaning embeds
    every memory, which takes a while with a sentence model: this does it now,
    with progress shown. Vectors published in the repository are read instead
    of computed; --publish commits the ones it lacks, so that the next clone
    (and the next sync of every other one) gets them with the memories.

    \b
    Examples:
        memsite index embed
        memsite index embed --publish && memsite sync
    """
    import time

    started = time.perf_counter()
    with ctx.store() as store:
        count = store.embed()
        published, commit = store.publish_vectors() if publish else (0, None)
        model = store.embedding_model
    if model is None:
        echo("No embedder: recall is by words only (see 'embedding.model' in mkdocs.yml)")
        return
    echo(f"{count} memories have vectors of {model} ({time.perf_counter() - started:.1f} s)")
    if publish:
        echo(f"Published {published} vectors (commit {commit[:12]})" if commit
             else "Every memory's vector is published already.")


@main.command()
@click.option("--lines", type=LINES, help="At most this many lines (default: auto_load_lines).")
@as_of_option("The core memory as it stood then")
@pass_context
def core(ctx: Context, lines: int | None, as_of: str | None) -> None:
    """Print the core memory an agent loads at start: world state, pinned
    memories and this agent's recent memories (none that was replaced).

    \b
    Example:
        memsite --agent planner core --lines 50
        memsite core --as-of 2026-03-01
    """
    with ctx.store() as store:
        echo(store.load_core(lines=lines, as_of=as_of))


def chain_lines(chain: list[Memory], here: str) -> list[str]:
    """A chain of memories as lines, oldest first: "abstract, date by agent → replaced by ... on date by agent"."""
    lines = []
    for memory, after in zip(chain, [*chain[1:], None]):
        mark = "*" if memory.id == here else " "
        line = (f"{mark} {short_id(memory.id)} {memory.abstract} ({memory.category}), "
                f"{memory.created:%Y-%m-%d} by {memory.agent}")
        if memory.valid_until is not None:
            by = f" by {short_id(after.id)}" if after is not None else ""
            who = f" by {after.agent}" if after is not None else ""
            line += f" → replaced{by} on {memory.valid_until:%Y-%m-%d}{who}"
        lines.append(line)
    return lines
