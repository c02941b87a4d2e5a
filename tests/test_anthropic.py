"""Claude's memory tool on memsite: conformance with the SDK's own tool, the SDK's tool runner, bad input, writers at once.

The conformance scripts run each list of commands against the SDK's
``BetaLocalFilesystemMemoryTool`` on a plain folder and against
:class:`MemsiteMemoryTool` on a fresh repository: every result (the text
Claude reads, or the error it is told) must be equal, except in the scripts
listed in DIFFERENT, whose reasons docs/guides/agents.md gives.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anthropic")

from anthropic import Anthropic  # noqa: E402
from anthropic.tools import BetaLocalFilesystemMemoryTool, ToolError  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from memsite import MemoryStore  # noqa: E402
from memsite.cli import main  # noqa: E402
from memsite.integrations.anthropic import MemsiteAsyncMemoryTool, MemsiteMemoryTool  # noqa: E402

from .conftest import ROOT, git, head  # noqa: E402

Command = dict[str, Any]


def view(path: str, view_range: Any = None) -> Command:
    return {"command": "view", "path": path, **({"view_range": view_range} if view_range is not None else {})}


def create(path: str, text: Any) -> Command:
    return {"command": "create", "path": path, "file_text": text}


def replace(path: str, old: Any, new: Any) -> Command:
    return {"command": "str_replace", "path": path, "old_str": old, "new_str": new}


def insert(path: str, line: Any, text: Any) -> Command:
    return {"command": "insert", "path": path, "insert_line": line, "insert_text": text}


def delete(path: str) -> Command:
    return {"command": "delete", "path": path}


def rename(old: str, new: str) -> Command:
    return {"command": "rename", "old_path": old, "new_path": new}


NOTES = "/memories/notes.md"
TEXT = "# Notes\nThe user deploys on Fridays.\nThe user prefers tabs.\n"

SCRIPTS: dict[str, list[Command]] = {
    "view of an empty root": [view("/memories")],
    "create, then view the file": [create(NOTES, TEXT), view(NOTES)],
    "view of the root lists two levels with sizes": [
        create("/memories/a.md", "alpha\n"), create("/memories/projects/acme.md", "Acme ships in May\n"),
        create("/memories/projects/deep/er/x.md", "three levels down\n"), create("/memories/b/c.md", "c"),
        view("/memories")],
    "view of a folder": [create("/memories/projects/acme.md", "Acme\n"), create("/memories/projects/beta.md", "B\n"),
                         view("/memories/projects")],
    "view with a trailing slash": [create("/memories/a.md", "a\n"), view("/memories/")],
    "view_range in the middle": [create(NOTES, TEXT), view(NOTES, [2, 3])],
    "view_range to the end": [create(NOTES, TEXT), view(NOTES, [2, -1])],
    "view_range from zero": [create(NOTES, TEXT), view(NOTES, [0, 1])],
    "view_range backwards": [create(NOTES, TEXT), view(NOTES, [3, 2])],
    "view of a missing path": [view("/memories/nothing.md")],
    "create an existing file": [create(NOTES, TEXT), create(NOTES, "again\n"), view(NOTES)],
    "create onto a folder": [create("/memories/p/a.md", "a\n"), create("/memories/p", "b\n")],
    "create the root": [create("/memories", "x\n")],
    "str_replace one place": [create(NOTES, TEXT), replace(NOTES, "Fridays", "Mondays"), view(NOTES)],
    "str_replace by nothing": [create(NOTES, TEXT), replace(NOTES, "The user prefers tabs.\n", ""), view(NOTES)],
    "str_replace not found": [create(NOTES, TEXT), replace(NOTES, "Sundays", "x")],
    "str_replace found twice names the lines": [create(NOTES, TEXT), replace(NOTES, "The user", "They")],
    "str_replace in a missing file": [replace("/memories/none.md", "a", "b")],
    "str_replace on a folder": [create("/memories/p/a.md", "a\n"), replace("/memories/p", "a", "b")],
    "str_replace across lines": [create(NOTES, TEXT), replace(NOTES, "Fridays.\nThe", "Fridays;\nthe"), view(NOTES)],
    "insert at the top": [create(NOTES, TEXT), insert(NOTES, 0, "First line"), view(NOTES)],
    "insert at the end": [create(NOTES, TEXT), insert(NOTES, 3, "Last line\n"), view(NOTES)],
    "insert in a file without a final newline": [create(NOTES, "one\ntwo"), insert(NOTES, 1, "between"), view(NOTES)],
    "insert_line -5": [create(NOTES, TEXT), insert(NOTES, -5, "x")],
    "insert_line 10^9": [create(NOTES, TEXT), insert(NOTES, 10**9, "x")],
    "insert in a missing file": [insert("/memories/none.md", 0, "x")],
    "insert into a folder": [create("/memories/p/a.md", "a\n"), insert("/memories/p", 0, "x")],
    "delete a file": [create(NOTES, TEXT), delete(NOTES), view(NOTES)],
    "delete a folder with its files": [create("/memories/p/a.md", "a\n"), create("/memories/p/q/b.md", "b\n"),
                                       create("/memories/keep.md", "k\n"), delete("/memories/p"), view("/memories")],
    "delete the root": [delete("/memories"), delete("/memories/")],
    "delete a missing path": [delete("/memories/none.md")],
    "rename a file": [create(NOTES, TEXT), rename(NOTES, "/memories/archive/notes.md"), view(NOTES),
                      view("/memories/archive/notes.md")],
    "rename onto an existing file": [create("/memories/a.md", "a\n"), create("/memories/b.md", "b\n"),
                                     rename("/memories/a.md", "/memories/b.md"), view("/memories/b.md")],
    "rename onto an existing folder": [create("/memories/a.md", "a\n"), create("/memories/p/b.md", "b\n"),
                                       rename("/memories/a.md", "/memories/p")],
    "rename a missing path": [rename("/memories/none.md", "/memories/x.md")],
    "rename the root": [rename("/memories", "/memories/x")],
    "rename a folder": [create("/memories/p/a.md", "a\n"), create("/memories/p/q/b.md", "b\n"),
                        rename("/memories/p", "/memories/r"), view("/memories"), view("/memories/r/q/b.md")],
    "rename across category folders": [create("/memories/preferences/editor.md", "Uses vim\n"),
                                       create("/memories/preferences/shell.md", "Uses fish\n"),
                                       rename("/memories/preferences/editor.md", "/memories/cases/editor.md"),
                                       view("/memories"), view("/memories/cases/editor.md")],
    "a path outside /memories": [view("/etc/passwd"), create("/tmp/x.md", "x"), delete("/home")],
    "a path without its leading slash": [view("memories/notes.md")],
    "'..' out of /memories": [view("/memories/../../etc/passwd"), create("/memories/../x.md", "x")],
    "text with carriage returns and blank space at line ends": [
        create(NOTES, "one  \r\ntwo\t\r\n\r\n  indented\n\n\n"), view(NOTES), replace(NOTES, "two", "2"), view(NOTES)],
    "text that looks like frontmatter": [create(NOTES, "---\ntitle: mine\n---\nbody\n"), view(NOTES)],
    "text in many scripts": [create(NOTES, "café ☕ 😀 日本語\n"), view(NOTES), view("/memories")],
    "a file without a final newline": [create(NOTES, "no newline"), view(NOTES), view("/memories")],
    "hidden files are not listed": [create("/memories/.hidden.md", "h\n"), create("/memories/.d/x.md", "x\n"),
                                    create("/memories/seen.md", "s\n"), view("/memories"), view("/memories/.hidden.md")],
    "double slashes and dots": [create("/memories//p/./a.md", "a\n"), view("/memories/p/a.md")],
    # --- scripts whose results differ (DIFFERENT says why) ---
    "'..' that stays inside": [create("/memories/p/../a.md", "a\n")],
    "percent-encoded traversal": [create("/memories/%2e%2e%2fescape.md", "x\n")],
    "a NUL in the path": [view("/memories/a\x00.md")],
    "a look-alike of /memories": [create("/memoriesX/a.md", "a\n")],
    "a 10 MB file_text": [create(NOTES, "word " * 2_000_000)],
    "text that is not UTF-8": [create(NOTES, "caf\udce9\n")],
    "an empty file": [create(NOTES, "")],
    "str_replace with an empty old_str": [create(NOTES, "ab\n"), replace(NOTES, "", "x")],
    "a file where a folder should be": [create("/memories/a.md", "a\n"), create("/memories/a.md/b.md", "b\n")],
    "a folder into itself": [create("/memories/p/a.md", "a\n"), rename("/memories/p", "/memories/p/q")],
    "a credential": [create(NOTES, "aws key AKIAQWERTYUIOPASDF23\n")],
    "insert_line that is not a number": [create(NOTES, TEXT), insert(NOTES, "two", "x")],
    "the last file of a folder deleted": [create("/memories/p/a.md", "a\n"), delete("/memories/p/a.md"),
                                          view("/memories")],
    "view_range on a folder": [create("/memories/a.md", "a\n"), create("/memories/b.md", "b\n"),
                               create("/memories/c.md", "c\n"), view("/memories", [2, 3])],
}

# Scripts whose results differ from the SDK's tool, and the difference in docs/guides/agents.md that says why.
DIFFERENT = {
    "'..' that stays inside": "`..` anywhere",
    "percent-encoded traversal": "percent-encoded",
    "a NUL in the path": "NUL",
    "a look-alike of /memories": "`/memoriesX`",
    "a 10 MB file_text": "max_memory_bytes",
    "text that is not UTF-8": "not UTF-8",
    "an empty file": "empty file",
    "str_replace with an empty old_str": "empty `old_str`",
    "a file where a folder should be": "is a file",
    "a folder into itself": "into itself",
    "a credential": "credential",
    "insert_line that is not a number": "not a whole number",
    "the last file of a folder deleted": "empty folder",
    "view_range on a folder": "`view_range` on a folder",
}


def results(tool: Any, commands: list[Command]) -> list[tuple[str, str]]:
    """What Claude is told for each command: ("ok", text), ("error", message) or ("exception", its type)."""
    told = []
    for command in commands:
        try:
            told.append(("ok", tool.call(command)))
        except ToolError as exc:
            told.append(("error", str(exc)))
        except Exception as exc:  # the SDK's tool lets some failures through; Claude then reads their repr
            told.append(("exception", type(exc).__name__))
    return told


def folder_sizes_left_out(told: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Listings with the sizes of folders replaced: a plain folder shows its file system's block size, memsite the
    size of the files in it (a difference docs/guides/agents.md lists)."""
    def sizes_out(text: str) -> str:
        if not text.startswith("Here're the files"):
            return text
        lines = text.split("\n")
        return "\n".join(f"<folder>\t{line.split(chr(9), 1)[1]}" if i == 1 or line.endswith("/") else line
                         for i, line in enumerate(lines))

    return [(kind, sizes_out(text)) for kind, text in told]


@pytest.fixture(scope="module")
def guide() -> str:
    return (ROOT / "docs" / "guides" / "agents.md").read_text()


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_the_sdks_tool_and_memsites_tell_claude_the_same(name: str, tmp_path: Path, guide: str) -> None:
    commands = SCRIPTS[name]
    plain = folder_sizes_left_out(results(BetaLocalFilesystemMemoryTool(str(tmp_path / "plain")), commands))
    with MemoryStore.init(tmp_path / "memory", agent="claude") as store:
        ours = folder_sizes_left_out(results(MemsiteMemoryTool(store), commands))
        assert git(store.root, "status", "--porcelain") == ""
    assert all(kind != "exception" for kind, _ in ours), ours  # every refusal is a ToolError Claude reads
    if name in DIFFERENT:
        assert ours != plain, f"{name!r} is listed as different, but the results are equal"
        assert DIFFERENT[name] in guide, f"docs/guides/agents.md does not explain {DIFFERENT[name]!r}"
    else:
        assert ours == plain


def test_the_scripts_are_forty_or_more_and_use_every_command() -> None:
    assert len(SCRIPTS) >= 40
    assert {c["command"] for commands in SCRIPTS.values() for c in commands} == {
        "view", "create", "str_replace", "insert", "delete", "rename"}
