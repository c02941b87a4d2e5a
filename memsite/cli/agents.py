"""Commands that let agents reach the memory where they live: the MCP server."""

from __future__ import annotations

import click

from .common import Context, main, pass_context


@main.command()
@click.option("--repo", "repo", help="The memory repository (default: -C / MEMSITE_DIR, else the current folder).")
@click.option("--agent", "agent", help="Who writes: the commit author (default: --agent / MEMSITE_AGENT).")
@pass_context
def mcp(ctx: Context, repo: str | None, agent: str | None) -> None:
    """Serve the memory repository to an MCP client over stdio.

    Tools: remember, recall, read, recent, update, forget, core, world_get,
    world_set, task_start, task_note, task_close, log_session. Every write is
    a git commit authored by the agent. Needs the extra: pip install 'memsite[mcp]'.

    \b
    Example (the command an MCP client runs):
        memsite mcp --repo ~/agent-memory --agent claude
    """
    try:
        from ..integrations.mcp_server import serve
    except ImportError as exc:
        from ..integrations import unusable

        raise click.ClickException(unusable("the MCP server", "mcp", "1.20 or later", "mcp", exc)) from None
    with Context(repo or ctx.repo, agent or ctx.agent).store() as store:
        serve(store)
