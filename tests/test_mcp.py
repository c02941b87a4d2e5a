"""The MCP server as a client sees it: a real `memsite mcp` subprocess driven by the SDK's stdio client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from memsite import MemoryStore
from memsite.cli import main

from .conftest import git, head

pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

pytestmark = pytest.mark.slow  # MCP servers as processes

ROOT = Path(__file__).resolve().parent.parent
TOOLS = {"remember", "recall", "read", "recent", "update", "forget", "core", "world_get", "world_set",
         "task_start", "task_note", "task_close", "log_session"}


@asynccontextmanager
async def server(repo: Path, agent: str = "claude") -> AsyncIterator[ClientSession]:
    """A `memsite mcp` process serving ``repo``, and a client session talking to it over stdio."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "memsite", "mcp", "--repo", str(repo),
                                                                 "--agent", agent],
                                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def failed(result: Any) -> bool:
    """Whether a tool result is an error: ``is_error`` in mcp 2.x, ``isError`` in 1.x."""
    return bool(getattr(result, "is_error", getattr(result, "isError", None)))


async def call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    """The tool's answer as data; a tool error fails the test with its message."""
    result = await session.call_tool(tool, arguments)
    text = result.content[0].text  # type: ignore[union-attr]
    assert not failed(result), f"{tool}: {text}"
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


async def error(session: ClientSession, tool: str, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    assert failed(result), f"{tool} did not fail: {result.content}"
    return result.content[0].text  # type: ignore[union-attr]


def last_commit(repo: Path) -> tuple[str, str, str]:
    return tuple(git(repo, "log", "-1", "--format=%H%n%an%n%s").splitlines())  # type: ignore[return-value]


def commit(repo: Path, sha: str) -> tuple[str, str]:
    """The author and subject of commit ``sha``."""
    return tuple(git(repo, "show", "-s", "--format=%an%n%s", sha).splitlines())  # type: ignore[return-value]


def test_every_tool_works_and_each_write_is_a_commit_by_the_servers_agent(store: MemoryStore) -> None:
    repo = store.root

    async def session_one() -> str:
        async with server(repo) as s:
            assert {t.name for t in (await s.list_tools()).tools} == TOOLS
            made = await call(s, "remember", content="Webhook retries duplicated refunds: use idempotency keys",
                              category="error_solution", tags=["payments"])
            assert made["action"] == "created" and made["category"] == "cases"
            assert last_commit(repo)[:2] == (made["commit"], "claude")
            again = await call(s, "remember", content="webhook retries duplicated refunds - use idempotency keys!",
                               category="cases")
            assert (again["action"], again["id"]) == ("skipped", made["id"])

            hits = (await call(s, "recall", query="duplicated refunds", limit=3))["results"]
            assert hits[0]["id"] == made["id"] and hits[0]["abstract"].startswith("Webhook retries")
            assert hits[0]["score"] > 0
            full = await call(s, "read", id=made["id"])
            assert full["content"] == "Webhook retries duplicated refunds: use idempotency keys"
            assert full["tags"] == ["payments"] and full["agent"] == "claude"
            other = await call(s, "remember", content="The user prefers short answers", category="preferences")
            assert [m["id"] for m in (await call(s, "recent", limit=2))["memories"]] == [other["id"], made["id"]]
            changed = await call(s, "update", id=other["id"], content="The user prefers short answers, in English")
            assert last_commit(repo)[:2] == (changed["commit"], "claude")

            world = await call(s, "world_set", values={"deploy.target": "staging", "ci.status": "green"})
            assert last_commit(repo)[0] == world["commit"]
            await call(s, "world_set", values={"ci.status": "red"})
            assert await call(s, "world_get") == {"ci.status": "red", "deploy.target": "staging"}
            assert await call(s, "world_get", key="ci.status") == {"ci.status": "red"}
            assert "deploy.target" in await call(s, "core", lines=40)

            gone = await call(s, "forget", id=other["id"], reason="superseded")
            assert last_commit(repo)[0] == gone["commit"]
            assert "Forget preferences: The user prefers short answers" in last_commit(repo)[2]

            started = await call(s, "task_start", type="debug", keywords=["refund webhook"], plan=["find the cause"])
            assert started["todo"] == [{"item": "find the cause", "done": False, "note": ""}]
            noted = await call(s, "task_note", done="find the cause", note="retries resend the refund",
                               problem="Refunds were paid twice")
            assert noted["todo"][0]["done"] is True
            return head(repo)

    before_close = asyncio.run(session_one())
    assert before_close == head(repo)  # the open task is working memory, not a commit

    async def session_two() -> None:  # a new server process closes the task the first one started
        async with server(repo) as s:
            closed = await call(s, "task_close", solution="Idempotency keys on refund requests",
                                learn=["pattern: duplicated webhook effects -> idempotency keys"],
                                world={"payments.refunds": "idempotent"})
            assert closed["session"].endswith("_debug_refund_webhook")
            assert commit(repo, closed["commit"]) == ("claude", "Task debug: refund webhook (succeeded)")
            logged = await call(s, "log_session", type="fix", keywords=["flaky test"], problem="A test timed out",
                                solution="Raised its timeout")
            assert commit(repo, logged["commit"]) == ("claude", "Task fix: flaky test (succeeded)")

    asyncio.run(session_two())
    with MemoryStore(repo, agent="planner") as reader:
        assert reader.world.read()["payments.refunds"] == "idempotent"
    sessions = sorted(p.name for p in (repo / "content" / "sessions").glob("*.md"))
    assert [name.split("_", 1)[1] for name in sessions] == ["debug_refund_webhook.md", "fix_flaky_test.md"]
    assert "duplicated webhook effects" in (repo / "content" / "notes" / "claude" / "agent_knowledge.md").read_text()


def cli_error(repo: Path, *args: str) -> str:
    result = CliRunner().invoke(main, ["-C", str(repo), "--agent", "claude", *args])
    assert result.exit_code == 1
    return result.output.strip().removeprefix("Error: ")


def test_bad_input_is_a_tool_error_with_the_clis_message_and_nothing_is_written(store: MemoryStore) -> None:
    repo = store.root
    kept = store.remember("Something worth keeping", category="general")
    unknown = "01JD3X4K9Q2W8E5R7T6Y1U3I0P"
    before = head(repo)

    async def run() -> None:
        async with server(repo) as s:
            cases = [
                (("remember", {"content": "x", "category": "nope"}), ("remember", "x", "-c", "nope")),
                (("remember", {"content": "key AKIAQWERTYUIOPASDF23"}), ("remember", "key AKIAQWERTYUIOPASDF23")),
                (("remember", {"content": "   "}), ("remember", "   ")),
                (("read", {"id": unknown}), ("show", unknown)),
                (("forget", {"id": unknown, "reason": "gone"}), ("forget", unknown, "-r", "gone")),
            ]
            for (tool, arguments), command in cases:
                assert await error(s, tool, **arguments) == cli_error(repo, *command)
            await call(s, "task_start", type="debug", keywords=["x"])
            message = await error(s, "task_close")  # the CLI's message, naming the tool's arguments for its options
            assert message == cli_error(repo, "task", "finish").replace("--problem", "problem").replace(
                "--solution", "solution")
            assert message.startswith("the task was not closed; nothing was committed")
            busy = await error(s, "task_start", type="feature", keywords=["y"])
            assert busy.split(";")[0] == cli_error(repo, "task", "start", "feature", "y").split(";")[0]
            assert busy.endswith("continue it with task_note, or close it with task_close(abandon=REASON)")
            assert head(repo) == before
            # The server keeps serving after every refusal.
            assert (await call(s, "read", id=kept.id))["content"] == "Something worth keeping"
            await call(s, "task_close", abandon="only a test")

    asyncio.run(run())


def test_two_servers_writing_to_one_repository_lose_nothing(store: MemoryStore) -> None:
    repo = store.root
    per_server = 15

    async def writer(agent: str) -> list[str]:
        async with server(repo, agent) as s:
            return [(await call(s, "remember", content=f"Observation {i} by {agent}: build {i * 7} passed",
                                category="events"))["commit"] for i in range(per_server)]

    async def both() -> list[list[str]]:
        return await asyncio.gather(writer("alpha"), writer("beta"))

    commits = [c for batch in asyncio.run(both()) for c in batch]
    history = set(git(repo, "log", "--format=%H").split())
    assert len(set(commits)) == 2 * per_server and set(commits) <= history
    with MemoryStore(repo, agent="reader") as reader:
        authors = sorted(m.agent for m in reader.list(category="events"))
    assert authors == ["alpha"] * per_server + ["beta"] * per_server
    assert git(repo, "status", "--porcelain") == ""


def test_a_call_the_tools_cannot_take_is_a_one_line_tool_error_and_the_server_goes_on(store: MemoryStore) -> None:
    repo = store.root
    before = head(repo)

    async def run() -> None:
        async with server(repo) as s:
            refused = [
                ("remember", {"content": 5}, "argument 'content': Input should be a valid string"),
                ("remember", {"content": "x", "tags": "python"}, "argument 'tags': Input should be a valid list"),
                ("remember", {}, "argument 'content': is required"),
                ("recall", {"query": "x", "limit": 0}, "argument 'limit': Input should be greater than or equal to 1"),
                ("world_set", {"values": {"ci": 1}}, "argument 'values.ci': Input should be a valid string"),
            ]
            for tool, arguments, what in refused:
                assert await error(s, tool, **arguments) == f"{tool}: {what}"
            unknown = await error(s, "remember_everything", content="x")
            assert unknown == f"unknown tool 'remember_everything'; the tools are {', '.join(sorted(TOOLS))}"
            # 10 MB in one argument: the store's cap refuses it, one line naming the setting
            huge = await error(s, "remember", content="word " * 2_000_000)
            assert huge == ("content: is 10000000 bytes, over the 65536-byte cap (plugins.memsite.max_memory_bytes); "
                            "split it into smaller memories")
            assert head(repo) == before
            made = await call(s, "remember", content="Still serving after the refusals")
            assert last_commit(repo)[:2] == (made["commit"], "claude")

    asyncio.run(run())


def test_a_client_that_disconnects_mid_call_leaves_the_repository_whole(store: MemoryStore, tmp_path: Path) -> None:
    """The client leaves while a write is under way: the server exits by itself, the write landed whole or
    not at all."""
    repo = store.root
    exit_code = tmp_path / "server-exit-code"
    command = (f"{sys.executable} -m memsite mcp --repo {repo} --agent claude; echo $? > {exit_code}")
    params = StdioServerParameters(command="sh", args=["-c", command], env={**os.environ, "PYTHONPATH": str(ROOT)})
    text = "Deploys go through the staging cluster first. " * 1000

    async def leave_mid_call() -> None:
        with open(tmp_path / "server.log", "w") as log:
            async with stdio_client(params, errlog=log) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                pending = asyncio.create_task(session.call_tool("remember", {"content": text}))
                await asyncio.sleep(0.02)
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pending

    before = head(repo)
    killed_by_the_client = False
    try:
        asyncio.run(leave_mid_call())
    except BaseExceptionGroup as group:  # mcp 1.x's client fails on a reply that comes after it left ...
        if not all(isinstance(e, anyio.BrokenResourceError) for e in group.exceptions):
            raise
        killed_by_the_client = True  # ... and then kills the server at once: what is left must be whole all the same
    for _ in range(100):  # the SDK stops waiting for the server after a while; the server goes on exiting
        if killed_by_the_client or (exit_code.exists() and exit_code.read_text().strip()):
            break
        time.sleep(0.1)
    if not killed_by_the_client:
        assert exit_code.read_text().strip() == "0", (tmp_path / "server.log").read_text()
    assert "Traceback" not in (tmp_path / "server.log").read_text()
    assert git(repo, "status", "--porcelain") == ""
    git(repo, "fsck", "--strict")
    with MemoryStore(repo, agent="reader") as reader:
        landed = [m for m in reader.list() if m.content.startswith("Deploys go through")]
    if landed:  # the write was acknowledged by a commit, authored by the server's agent
        assert head(repo) != before and landed[0].agent == "claude" and len(landed) == 1
    else:
        assert head(repo) == before

    async def next_session() -> None:
        async with server(repo) as s:
            await call(s, "remember", content="The next session writes as usual")

    asyncio.run(next_session())


def test_the_cli_names_the_mcp_version_it_found_when_it_cannot_use_it(store: MemoryStore,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    for module in ("mcp.server.mcpserver", "mcp.server.fastmcp"):  # neither major's server can be imported
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.delitem(sys.modules, "memsite.integrations.mcp_server", raising=False)
    result = CliRunner().invoke(main, ["mcp", "--repo", str(store.root), "--agent", "claude"])
    assert result.exit_code == 1
    message = result.output.strip()
    assert message.startswith(f"Error: the MCP server needs mcp 1.20 or later; mcp {metadata.version('mcp')} "
                              "is installed and cannot be used (")
    assert message.endswith("pip install 'memsite[mcp]'") and "\n" not in message


def test_remember_can_supersede_a_memory_that_is_no_longer_true(store: MemoryStore) -> None:
    old = store.remember("The user lives in Berlin.", category="profile")

    async def run() -> tuple[Any, Any, str]:
        async with server(store.root) as session:
            made = await call(session, "remember", content="The user lives in Paris.", category="profile",
                              supersedes=old.id)
            found = await call(session, "recall", query="where does the user live")
            refused = await error(session, "remember", content="The user lives in Rome.", category="profile",
                                  supersedes=old.id)
            return made, found, refused

    made, found, refused = asyncio.run(run())
    assert made["action"] == "created" and made["supersedes"] == old.id
    assert [hit["id"] for hit in found["results"]] == [made["id"]]
    assert refused.startswith(f"supersedes: {old.id} was already superseded by {made['id']}")
    assert store.get(old.id).superseded_by == made["id"]
