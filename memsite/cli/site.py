"""Commands for the website, the demo, and sharing memory through git remotes."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ..api import MERGE_DRIVERS
from ..api import merge_driver as run_merge
from ..foundation.config import ENGINES
from ..foundation.errors import MemsiteError
from .common import Context, echo, echo_json, json_option, main, pass_context, repo_root


def _address_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--host and --port, shared by serve and demo."""
    func = click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535),
                        help="Port to serve on.")(func)
    return click.option("--host", default="127.0.0.1", show_default=True,
                        help="Address to serve on (0.0.0.0: every interface).")(func)


@main.command()
@click.option("-d", "--site-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where to write the site (default: site/ beside mkdocs.yml).")
@click.option("--strict", is_flag=True, help="Fail on warnings too.")
@click.option("--engine", type=click.Choice(ENGINES),
              help="What renders the pages (default: the engine setting in mkdocs.yml, else mkdocs).")
@click.option("--clean", is_flag=True, help="Write every memory page again instead of keeping unchanged ones.")
@pass_context
def build(ctx: Context, site_dir: Path | None, strict: bool, engine: str | None, clean: bool) -> None:
    """Build the memory website (Material theme) from the repository.

    The site is written into a fresh folder and replaces the previous one
    only once whole: a build that fails or is interrupted leaves the site as
    it was. A memory page that did not change since the previous build is
    kept (the same file), not written again; --clean writes them all. The
    site is made to be served (its links are folder URLs and its search
    runs in a web worker): publish the folder on any web server, or look at
    it with 'memsite serve'.

    \b
    Examples:
        memsite build --site-dir public/
        memsite build --engine zensical
        memsite build --clean
    """
    from ..site.build import build as build_site

    root = repo_root(ctx)
    try:
        out = build_site(root, site_dir, strict=strict, engine=engine, clean=clean,
                         announce=lambda line: echo(f"note: {line}", err=True))
    except KeyboardInterrupt:
        echo("Interrupted: the site was not replaced; it is the previous build, whole", err=True)
        raise click.exceptions.Exit(130) from None
    echo(f"Built the site into {out}; to read it: memsite -C {_shell(root)} serve")


@main.command()
@_address_options
@click.option("-a", "--dev-addr", metavar="IP:PORT", help="Address and port in one (overrides --host and --port).")
@click.option("--open", "open_in_browser", is_flag=True, help="Open the site in a browser.")
@pass_context
def serve(ctx: Context, host: str, port: int, dev_addr: str | None, open_in_browser: bool) -> None:
    """Serve the memory website locally, rebuilding it as memories change.

    Prints the address it serves; Ctrl-C stops.

    \b
    Example:
        memsite serve --port 8001
    """
    from ..site.build import serve as serve_site

    if dev_addr:
        host, _, number = dev_addr.rpartition(":")
        if not host or not number.isdigit() or not 0 < int(number) < 65536:
            raise click.BadParameter(f"{dev_addr!r}: expected IP:PORT, e.g. 127.0.0.1:8001", param_hint="--dev-addr")
        port = int(number)
    serve_site(repo_root(ctx), host.strip("[]"), port, open_in_browser=open_in_browser,
               announce=lambda line: echo(line, err=True))


@main.command()
@click.option("-o", "--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder to write the Markdown files into.")
@click.option("--no-l1", is_flag=True, help="Leave out the overviews (L1): abstracts only.")
@click.option("--by-category", is_flag=True, help="Also write by-category/<category>.md.")
@pass_context
def project(ctx: Context, out: Path, no_l1: bool, by_category: bool) -> None:
    """Write daily summaries (and category views) as Markdown for external indexers.

    \b
    Example:
        memsite project --out qmd/ --by-category
    """
    from ..site.build import project as write_projection

    files = write_projection(repo_root(ctx), out, include_l1=not no_l1, by_category=by_category)
    echo(f"Wrote {len(files)} files into {out}")


@main.command()
@click.argument("folder", default="memsite-demo", type=click.Path(file_okay=False, path_type=Path))
@click.option("--serve", "and_serve", is_flag=True, help="Serve the site afterwards (see --host and --port).")
@_address_options
@click.option("--weeks", default=6, show_default=True, type=click.IntRange(1, 52), help="Weeks to simulate.")
def demo(folder: Path, and_serve: bool, host: str, port: int, weeks: int) -> None:
    """Create a demo memory repository and build its website.

    Three agents work through the Python API over several simulated weeks
    (memories in every category, tasks and sessions, world-state merges,
    recalls, trims, a pattern hot enough to become a skill draft); the site
    is built into FOLDER/site.

    \b
    Examples:
        memsite demo /tmp/memsite-demo --serve
        memsite demo /tmp/memsite-demo --serve --port 8001
    """
    from ..demo import create
    from ..site.build import build as build_site
    from ..site.build import check_port, url
    from ..site.build import serve as serve_site

    def report(message: str) -> None:
        echo(message, err=True)

    if and_serve:
        check_port(host, port)  # before the demo is written: a taken port costs nothing
    create(folder, weeks=weeks, progress=report)
    out = build_site(folder)
    echo(f"Demo repository: {folder.resolve()}\nSite built into: {out.resolve()}")
    if and_serve:
        serve_site(folder, host, port, announce=lambda line: echo(line, err=True))
    else:
        echo(f"To read it: memsite -C {_shell(folder.resolve())} serve --port {port}   (then open {url(host, port)})")


def _shell(path: Path) -> str:
    import shlex

    return shlex.quote(str(path))


@main.command()
@click.option("--remote", default="origin", show_default=True, help="The git remote to share memory through.")
@click.option("--branch", help="The shared branch (default: the checked-out branch's name).")
@click.option("--every", type=click.FloatRange(min=1), metavar="SECONDS",
              help="Keep syncing, every SECONDS, until Ctrl-C.")
@json_option("the result")
@pass_context
def sync(ctx: Context, remote: str, branch: str | None, every: float | None, as_json: bool) -> None:
    """Share this clone's memory through a git remote: merge, publish, integrate.

    Merges the remote's shared branch in with memsite's merge drivers,
    publishes this agent's commits to its own branch (agent/<name>, which
    only it pushes) and pushes them to the shared branch, unless the merge
    queue is running (sync.integrate). When other clones push first, the
    sync still succeeds: the commits are published and queued, and 'memsite
    integrate' (a CI job) merges them. Nothing is
    ever force-pushed and no local commit is dropped. Exit status 0 for
    integrated, queued and up to date.

    \b
    Examples:
        memsite sync
        memsite sync --every 30        # keep syncing until Ctrl-C
    """
    with ctx.store() as store:
        while True:
            try:
                result = store.sync(remote, branch)
            except MemsiteError as exc:
                if every is None:
                    raise
                echo(f"Error: {exc}; trying again in {every:g} s", err=True)  # a daemon keeps going
                time.sleep(every)
                continue
            if as_json:
                echo_json(dataclasses.asdict(result))
            else:
                echo(_synced(result))
            if every is None:
                return
            time.sleep(every)


def _synced(result: Any) -> str:
    where = f"{result.remote}/{result.branch}"
    restored = (f"; {result.restored} commit(s) {where} had lost were published again" if result.restored else "")
    if result.status == "up to date":
        return f"Up to date with {where} ({result.fetched} commits fetched){restored}"
    if result.status == "queued":
        return (f"Published {result.pushed} commit(s) to {result.remote}/{result.published}, queued for "
                f"{where} ({result.note}); 'memsite integrate' merges them{restored}")
    created = " (created it)" if result.created else ""
    return f"Synced with {where}{created}: {result.fetched} commits fetched, {result.pushed} pushed{restored}"


@main.command()
@click.option("--remote", default="origin", show_default=True, help="The git remote the agent branches are on.")
@click.option("--branch", default="main", show_default=True, help="The shared branch to merge them into.")
@json_option("the result")
@pass_context
def integrate(ctx: Context, remote: str, branch: str, as_json: bool) -> None:
    """Merge every published agent branch into the shared branch: a merge queue.

    One merge commit per run (memsite's merge drivers resolve world state
    and recall counts), pushed once. Safe to run from any clone or CI while
    agents sync, and beside another integrator: the loser tries again, and
    nothing is merged twice. An agent branch with a conflict only a person
    can resolve is left out and named (exit status 1); the others are merged.

    \b
    Example:
        memsite --agent integrator integrate --branch main
    """
    with ctx.store() as store:
        result = store.integrate(remote, branch)
    if as_json:
        echo_json(dataclasses.asdict(result))
    elif result.commit is None and not result.left_out:
        echo(f"Nothing to integrate: every agent branch is on {result.remote}/{result.branch}")
    elif result.commit is not None:
        echo(f"Integrated {len(result.merged)} agent branch(es) into {result.remote}/{result.branch} "
             f"({result.commit[:12]}): {', '.join(result.merged)}")
    for name, why in result.left_out:
        echo(f"Left out {name}: {why}; merge it by hand (or sync that clone after resolving)", err=True)
    if result.left_out:
        raise click.exceptions.Exit(1)


@main.command()
@click.option("--remote", default="origin", show_default=True, help="The git remote to push the branch to.")
@click.option("--base", default="main", show_default=True, help="The branch the pull request goes into.")
@pass_context
def propose(ctx: Context, remote: str, base: str) -> None:
    """Push this agent's review branch (review/<name>) and print the pull request body.

    The branch is for a person to review and merge: unlike agent/<name>,
    where 'memsite sync' publishes, the merge queue leaves it alone.

    \b
    Example:
        memsite --agent coder propose | gh pr create --base main --head review/coder --body-file -
    """
    with ctx.store() as store:
        branch, body = store.propose(remote, base)
    echo(f"Pushed {branch} to {remote}; open a pull request into {base} with this body:", err=True)
    echo(body)


@main.command("merge-driver")
@click.argument("kind", type=click.Choice(MERGE_DRIVERS))
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
