"""``memsite doctor``: find (and with --fix, repair) what faults and hand edits left behind."""

from __future__ import annotations

import click

from ..api import MemoryStore
from .common import Context, echo, main, pass_context, repo_root


@main.command()
@click.option("--fix", is_flag=True,
              help="Repair what is safe: memsite's own locks left by a killed writer are taken back; "
              "anyone else's lock is never removed.")
@pass_context
def doctor(ctx: Context, fix: bool) -> None:
    """Find what killed writers, hand edits and damaged caches left behind.

    Reports git lock files (and whose they may be), temporary files of
    writers that died, an interrupted write, an unfinished site build, a
    missing .git/index, damaged or stale files in .memsite/, memory files
    that cannot be read, ids used by two files, and memories in the wrong
    folder. Exits 1 while anything is wrong. --fix takes back memsite's own
    locks left by a killed writer (never anyone else's), removes dead
    writers' temporary files, finishes an interrupted write, removes what an
    unfinished site build left (the site is the build before it, whole),
    rebuilds a missing index and the derived files, removes the copies of
    damaged files set aside earlier, and runs
    'memsite migrate'; what needs a person is left, with the fix.

    \b
    Examples:
        memsite doctor
        memsite doctor --fix
    """
    from ..site import output

    root = repo_root(ctx)
    findings = MemoryStore.diagnose(root) + output.findings(root)
    if fix and any(f.fixable for f in findings):
        repaired = MemoryStore.repair(root, [f for f in findings if f.kind != "site"], agent=ctx.agent)
        for line in repaired + output.repair(findings):
            echo(f"repair: {line}", err=True)
        findings = MemoryStore.diagnose(root) + output.findings(root)
    problems = [f for f in findings if f.problem]
    for finding in findings:
        echo(f"{'problem' if finding.problem else 'note'}: {finding.message}", err=True)
    if problems:
        fixable = sum(f.fixable for f in problems)
        hint = f" ({fixable} repaired by 'memsite doctor --fix')" if fixable and not fix else ""
        raise click.ClickException(f"{len(problems)} problem(s) found{hint}")
    echo("no problems found", err=True)
