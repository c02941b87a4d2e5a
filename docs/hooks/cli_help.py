"""MkDocs hook of the project's documentation: every command's ``--help``, generated at build time.

A page holding the line ``<!-- memsite --help -->`` gets, in its place, the
help of ``memsite`` and of each of its commands (and their subcommands), as
``memsite COMMAND --help`` prints it, so the reference cannot drift from the
code. Not a memsite feature: only ``mkdocs.docs.yml`` names it.
"""

from __future__ import annotations

import click

MARKER = "<!-- memsite --help -->"


def _helps(command: click.Command, name: str, parent: click.Context | None = None) -> list[str]:
    context = click.Context(command, info_name=name, parent=parent, terminal_width=100, max_content_width=100)
    parts = [f"### `{context.command_path}`\n\n```text\n{command.get_help(context).rstrip()}\n```"]
    if isinstance(command, click.Group):
        for sub in sorted(command.commands):
            parts += _helps(command.commands[sub], sub, context)
    return parts


def on_page_markdown(markdown: str, **_: object) -> str:
    if MARKER not in markdown:
        return markdown
    from memsite.cli import main

    return markdown.replace(MARKER, "\n\n".join(_helps(main, "memsite")))
