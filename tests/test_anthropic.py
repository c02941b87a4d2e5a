"""Claude's memory tool on memsite: conformance with the SDK's own tool, the SDK's tool runner, bad input,
writers at once.

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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anthropic")

from anthropic import Anthropic
from anthropic.tools import BetaLocalFilesystemMemoryTool, ToolError
from click.testing import CliRunner

from memsite import MemoryStore, NotFound
from memsite.cli import main
from memsite.integrations.anthropic import MemsiteAsyncMemoryTool, MemsiteMemoryTool

from .conftest import ROOT, git, head

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
                                    create("/memories/seen.md", "s\n"), view("/memories"),
                                    view("/memories/.hidden.md")],
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
    "a look-alike of /memories": "`/memoriesX/a.md`",
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


# --- the mapping: files Claude writes are memories everyone sees ------------------------------------------------


def tell(tool: Any, **command: Any) -> str:
    return tool.call(command)  # type: ignore[no-any-return]


def refused(tool: Any, **command: Any) -> str:
    with pytest.raises(ToolError) as caught:
        tool.call(command)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def check(repo: Path) -> None:
    """`memsite check` passes and the working tree is clean."""
    result = CliRunner().invoke(main, ["-C", str(repo), "check"])
    assert result.exit_code == 0, result.output
    assert git(repo, "status", "--porcelain") == ""


def test_every_file_is_a_memory_recall_and_diff_see_and_claude_reads_back_exactly(store: MemoryStore) -> None:
    repo, start = store.root, head(store.root)
    tool = MemsiteMemoryTool(store)
    text = "---\ntitle: mine\n---\n# Deploys\nThe team deploys on Fridays after the 14:00 standup.  \r\n\n"
    tell(tool, command="create", path="/memories/projects/deploys.md", file_text=text)
    tell(tool, command="create", path="/memories/preferences/editor.md", file_text="The user edits in vim.\n")
    subjects = git(repo, "log", "--format=%an|%s", f"{start}..").splitlines()
    assert subjects == ["planner|Memory tool: create /memories/preferences/editor.md",
                        "planner|Memory tool: create /memories/projects/deploys.md"]

    # Claude reads exactly what it wrote, never memsite's frontmatter
    shown = tell(tool, command="view", path="/memories/projects/deploys.md")
    assert shown.split("\n", 1)[1] == "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(text.split("\n"), 1))
    # ... and the memory is a memsite memory like any other: its category from the folder, recall finds it
    [editor] = [m for m in store.list() if m.extra.get("file") == "/memories/preferences/editor.md"]
    assert (editor.category, editor.agent, editor.content) == ("preferences", "planner", "The user edits in vim.")
    [hit] = store.recall("deploys Fridays standup", limit=1)
    assert hit.memory.extra["file"] == "/memories/projects/deploys.md"
    assert hit.memory.content.startswith("---\ntitle: mine\n---\n# Deploys")
    report = CliRunner().invoke(main, ["-C", str(repo), "diff", start, "--json"])
    assert report.exit_code == 0, report.output
    assert '"abstract": "The user edits in vim."' in report.output and '"abstract": "title: mine"' in report.output

    # an edit keeps the memory (same id, one commit); a rename across category folders moves it to that category
    tell(tool, command="str_replace", path="/memories/preferences/editor.md", old_str="vim", new_str="helix")
    tell(tool, command="rename", old_path="/memories/preferences/editor.md", new_path="/memories/cases/editor.md")
    moved = store.get(editor.id)
    assert (moved.category, moved.content, moved.extra["file"]) == ("cases", "The user edits in helix.",
                                                                    "/memories/cases/editor.md")
    subject, *_, trailer = git(repo, "log", "-1", "--format=%B").strip().split("\n")
    assert subject == "Memory tool: rename /memories/preferences/editor.md ->…"  # (cut at 72 characters)
    assert trailer == "Memory-Tool: rename /memories/preferences/editor.md -> /memories/cases/editor.md"
    # a memory written some other way is not a file of Claude's
    store.remember("Written through remember()")
    assert "remember" not in tell(tool, command="view", path="/memories")
    # a second tool (another process, another agent) sees the same files
    with MemoryStore(repo, agent="claude-2") as other:
        assert tell(MemsiteMemoryTool(other), command="view", path="/memories/cases/editor.md").endswith(
            "1\tThe user edits in helix.\n     2\t")
    tell(tool, command="delete", path="/memories/projects")
    with pytest.raises(NotFound, match="forgotten"):
        store.get(hit.memory.id)
    check(repo)


def test_a_person_who_edits_the_file_in_review_is_what_claude_reads_next(store: MemoryStore) -> None:
    tool = MemsiteMemoryTool(store)
    tell(tool, command="create", path="/memories/notes.md", file_text="Deploys  \r\non Fridays\n")
    tell(tool, command="create", path="/memories/plain.md", file_text="Deploys on Fridays\n")
    assert tell(tool, command="view", path="/memories/notes.md").endswith(
        "1\tDeploys  \r\n     2\ton Fridays\n     3\t")
    for path in sorted((store.root / "content" / "memories").rglob("*.md")):  # a reviewer fixes both bodies by hand
        head, body = path.read_text().split("\n---\n", 1)
        path.write_text(f"{head}\n---\n{body.replace('on Fridays', 'on Thursdays')}")
    git(store.root, "commit", "-qam", "Deploys moved to Thursdays")
    assert tell(tool, command="view", path="/memories/notes.md").endswith("1\tDeploys\n     2\ton Thursdays")
    assert tell(tool, command="view", path="/memories/plain.md").endswith("1\tDeploys on Thursdays\n     2\t")
    check(store.root)


def test_bad_input_is_one_clear_error_for_claude_and_writes_nothing(store: MemoryStore, tmp_path: Path) -> None:
    repo = store.root
    tool = MemsiteMemoryTool(store)
    tell(tool, command="create", path="/memories/notes.md", file_text=TEXT)
    tell(tool, command="create", path="/memories/preferences/editor.md", file_text="vim\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("not Claude's")
    (repo / "content" / "memories" / "link").symlink_to(outside)  # a symlink into the working tree, by hand
    before = head(repo)
    attacks = {
        "/memories/../../etc/passwd": "would escape /memories directory",
        "/memories/a/../../../etc/passwd": "would escape /memories directory",
        "/memories/a/../b.md": "has '..'",
        "/memories/%2e%2e%2fetc%2fpasswd": "percent-encoded characters (%2e)",
        "/memories/%2E%2E/x.md": "percent-encoded",
        "/etc/passwd": "Path must start with /memories, got: /etc/passwd",
        "/memoriesX/a.md": "Path must start with /memories",
        "/memories/a\x00.md": "NUL byte",
        "/memories/..\\..\\x.md": "backslash",
        "/memories/a\nb.md": "control character",
        "/memories/" + "x" * 300 + ".md": "longer than 255 bytes",
    }
    for path, expected in attacks.items():
        for command in ({"command": "view", "path": path}, {"command": "create", "path": path, "file_text": "x"},
                        {"command": "delete", "path": path}, {"command": "rename", "old_path": "/memories/notes.md",
                                                              "new_path": path}):
            assert expected in refused(tool, **command), (path, command)
    for path in ("/memories/link/secret.md", "/memories/link"):  # the symlink is no file of Claude's: nothing there
        assert "does not exist" in refused(tool, command="view", path=path)
    assert "would escape" in refused(tool, command="view", path="/memories/../content/memories/link/secret.md")

    big = refused(tool, command="create", path="/memories/big.md", file_text="word " * 2_000_000)
    assert big == ("/memories/big.md: file_text is 10000000 bytes, over the 65536-byte cap "
                   "(plugins.memsite.max_memory_bytes); split it into smaller files")
    assert "over the 65536-byte cap" in refused(tool, command="insert", path="/memories/notes.md", insert_line=0,
                                                insert_text="x" * 70_000)
    assert refused(tool, command="str_replace", path="/memories/notes.md", old_str="", new_str="x") == (
        "No replacement was performed: old_str is empty; give the exact text to replace")
    assert refused(tool, command="insert", path="/memories/notes.md", insert_line=-5, insert_text="x") == (
        "Invalid `insert_line` parameter: -5. It should be within the range [0, 3].")
    assert "[0, 3]" in refused(tool, command="insert", path="/memories/notes.md", insert_line=10**9, insert_text="x")
    assert "not UTF-8 text" in refused(tool, command="create", path="/memories/u.md", file_text="caf\udce9")
    assert "not valid UTF-8" in refused(tool, command="create", path="/memories/u.md", file_text=b"caf\xe9")
    assert "NUL byte" in refused(tool, command="create", path="/memories/u.md", file_text="a\x00b")
    assert refused(tool, command="create", path="/memories/key.md", file_text="id\naws AKIAQWERTYUIOPASDF23\n") == (
        "/memories/key.md line 2: looks like an AWS access key id (rule aws-access-key-id); nothing was written: "
        "remove the secret and store where it is kept instead")
    assert "looks like" in refused(tool, command="str_replace", path="/memories/notes.md", old_str="tabs",
                                   new_str="AKIAQWERTYUIOPASDF23")
    assert "empty" in refused(tool, command="str_replace", path="/memories/notes.md", old_str=TEXT, new_str=" \n")
    assert "already exists" in refused(tool, command="rename", old_path="/memories/notes.md",
                                       new_path="/memories/preferences/editor.md")
    assert "into itself" in refused(tool, command="rename", old_path="/memories/preferences",
                                    new_path="/memories/preferences/old")
    assert "needs `file_text`" in refused(tool, command="create", path="/memories/x.md")
    assert head(repo) == before  # nothing was written
    (repo / "content" / "memories" / "link").unlink()
    assert tell(tool, command="view", path="/memories/notes.md").endswith("3\tThe user prefers tabs.\n     4\t")
    check(repo)


def test_a_view_of_thousands_of_files_fits_in_16000_characters_and_pages_through_the_rest(store: MemoryStore) -> None:
    tool = MemsiteMemoryTool(store)
    with store.transaction("many files") as tx:  # (as the tool writes them, without 3,000 commits)
        for i in range(3000):
            tool.files._add(tx, f"people/person-{i:04}.md", f"Person {i} works on project {i % 17}.\n")
    listing = tell(tool, command="view", path="/memories")
    lines = listing.split("\n")
    assert len(listing) <= 16_000 and lines[2].endswith("/memories/people/") and lines[3].endswith("person-0000.md")
    shown = len(lines) - 3
    assert lines[-1] == (f"(entries 1-{shown} of 3001 are shown; view /memories with view_range "
                         f"[{shown + 1}, {2 * shown}] for the next ones, or view a folder)")
    following = tell(tool, command="view", path="/memories", view_range=[shown + 1, 2 * shown]).split("\n")
    assert following[2].endswith(f"/memories/people/person-{shown - 1:04}.md")  # (entry shown + 1: the folder first)
    last = tell(tool, command="view", path="/memories", view_range=[2990, -1]).split("\n")
    assert last[-2].endswith("person-2999.md") and last[-1] == "(entries 2990-3001 of 3001 are shown)"
    assert len(last) == 2 + 12 + 1


# --- the SDK's own tool runner, against a stand-in for the API on 127.0.0.1 --------------------------------------


class ScriptedAPI(ThreadingHTTPServer):
    """The Messages API as a script: each POST /v1/messages gets the next reply; requests are kept."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies, self.requests = list(replies), []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                api.requests.append(json.loads(body))
                reply = json.dumps(api.replies.pop(0)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    def __enter__(self) -> ScriptedAPI:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


def message(n: int, *blocks: dict[str, Any], stop: str = "tool_use") -> dict[str, Any]:
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": "claude-test", "content": list(blocks),
            "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 10}}


def memory_call(n: int, **command: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{n}", "name": "memory", "input": command}


CONVERSATION = [
    message(1, memory_call(1, command="view", path="/memories")),
    message(2, {"type": "text", "text": "I'll note that."},
            memory_call(2, command="create", path="/memories/user.md", file_text="# User\n- deploys on Fridays\n")),
    message(3, memory_call(3, command="str_replace", path="/memories/user.md", old_str="Fridays",
                           new_str="Fridays, never on holidays")),
    message(4, memory_call(4, command="create", path="/memories/../escape.md", file_text="x")),
    message(5, {"type": "text", "text": "Noted: you deploy on Fridays."}, stop="end_turn"),
]


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [block for block in request["messages"][-1]["content"] if block.get("type") == "tool_result"]


def said(result: dict[str, Any]) -> str:
    """The text of a tool result (the SDK sends a string, or text blocks)."""
    content = result["content"]
    return content if isinstance(content, str) else "".join(block["text"] for block in content)


def test_the_sdks_tool_runner_drives_memsites_tool_and_the_memories_land_in_git(store: MemoryStore) -> None:
    start = head(store.root)
    with ScriptedAPI(CONVERSATION) as api:
        client = Anthropic(api_key="test-key", base_url=api.url, max_retries=0)
        runner = client.beta.messages.tool_runner(
            model="claude-test", max_tokens=1024, tools=[MemsiteMemoryTool(store)],
            messages=[{"role": "user", "content": "Remember that I deploy on Fridays, never on holidays."}])
        final = runner.until_done()
    assert final.content[0].text == "Noted: you deploy on Fridays."
    assert api.requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    results = [tool_results(request)[0] for request in api.requests[1:]]
    assert said(results[0]).endswith("0B\t/memories")
    assert said(results[1]) == "File created successfully at: /memories/user.md"
    assert "2\t- deploys on Fridays, never on holidays" in said(results[2])
    assert results[3]["is_error"] is True
    assert said(results[3]) == "Path /memories/../escape.md would escape /memories directory"
    assert git(store.root, "log", "--format=%an|%s", f"{start}..").splitlines() == [
        "planner|Memory tool: str_replace /memories/user.md", "planner|Memory tool: create /memories/user.md"]
    [memory] = store.list()
    assert memory.content == "# User\n- deploys on Fridays, never on holidays"
    check(store.root)


def test_the_async_tool_runs_the_same_commands(store: MemoryStore) -> None:
    tool = MemsiteAsyncMemoryTool(store)

    async def conversation() -> list[str]:
        told = [await tool.call(create(NOTES, TEXT)), await tool.call(insert(NOTES, 1, "Second")),
                await tool.call(rename(NOTES, "/memories/archive/notes.md")),
                await tool.call(view("/memories/archive/notes.md", [1, 2]))]
        with pytest.raises(ToolError, match="does not exist"):
            await tool.call(view(NOTES))
        await tool.call(delete("/memories/archive"))
        told.append(await tool.call(view("/memories")))
        return told

    told = asyncio.run(conversation())
    assert told[3] == ("Here's the content of /memories/archive/notes.md with line numbers:\n"
                       "     1\t# Notes\n     2\tSecond")
    assert told[4].endswith("0B\t/memories")
    assert len(git(store.root, "log", "--format=%s").splitlines()) == 5  # init + create, insert, rename, delete
    check(store.root)


# --- two tools writing at once ------------------------------------------------------------------------------------


WRITER = """
import sys
from memsite import MemoryStore
from memsite.integrations.anthropic import MemsiteMemoryTool
repo, agent, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with MemoryStore(repo, agent=agent) as store:
    tool = MemsiteMemoryTool(store)
    for i in range(count):
        tool.call({"command": "create", "path": f"/memories/{agent}/note-{i}.md", "file_text": f"{agent} note {i}\\n"})
        tool.call({"command": "insert", "path": "/memories/shared.md", "insert_line": 1,
                   "insert_text": f"{agent} {i}"})
        print("ACK", i, flush=True)
"""


def test_two_tools_writing_at_once_lose_nothing(store: MemoryStore) -> None:
    tool = MemsiteMemoryTool(store)
    tell(tool, command="create", path="/memories/shared.md", file_text="Shared log\n")
    count = 12
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(store.root), agent, str(count)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT)}) for agent in ("alpha", "beta")]
    for writer in writers:
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err
        assert out.count("ACK") == count
    shared = tell(tool, command="view", path="/memories/shared.md")
    for agent in ("alpha", "beta"):
        listing = tell(tool, command="view", path=f"/memories/{agent}")
        assert listing.count(".md") == count
        assert all(f"\t{agent} {i}" in shared for i in range(count))  # no insert lost to the other writer
    assert len(shared.split("\n")) == 1 + 1 + 2 * count + 1
    authors = git(store.root, "log", "--format=%an").split()
    assert authors.count("alpha") == authors.count("beta") == 2 * count
    check(store.root)
