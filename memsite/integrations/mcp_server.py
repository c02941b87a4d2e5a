"""The memory repository as an MCP server: ``memsite mcp`` serves these tools over stdio.

Built on the official MCP SDK (the ``memsite[mcp]`` extra), either major:
``MCPServer`` on mcp 2.x, ``FastMCP`` (its name in 1.x) on mcp 1.x. Each tool
is a thin call into :class:`memsite.MemoryStore`; its typed parameters and
docstring are what the model reads. Every write is a git commit authored by
the server's agent. Bad input comes back as a tool error of one line: the
message the CLI prints for a refused write, the argument and what was wrong
with it for a call the tool's parameters do not accept, the tools there are
for an unknown tool. Nothing is written and the server goes on. Calls run one
at a time (mcp 2.x runs a tool in a worker thread: two calls would otherwise
share the store at once).

The task protocol works across calls as it does across CLI processes: each
task tool picks the agent's task up from its ``task_process.md`` and lets go
of it before returning, so ``task_start`` in one call and ``task_close`` in a
later one (or after a restart of the server) close the same task.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from mcp.types import CallToolResult
from pydantic import Field, ValidationError

try:
    from mcp.server.mcpserver import MCPServer as _Server  # mcp 2.x
except ImportError:
    from mcp.server.fastmcp import FastMCP as _Server  # type: ignore[attr-defined, no-redef]  # mcp 1.x

from ..api import MemoryStore
from ..features.protocol import reworded
from ..foundation.errors import MemsiteError, NotFound
from ..foundation.fileformat import memory_fields
from ..foundation.record import Memory, format_time, short_id

F = TypeVar("F", bound=Callable[..., Any])

INSTRUCTIONS = """\
Long-term memory kept in a git repository; every write is a commit a person can review.
Call `core` at the start of a conversation for the shared world state and pinned memories.
`recall` before answering questions about past work; `remember` facts, preferences and
solutions worth keeping (one self-contained statement each). For a piece of work, use
`task_start`, `task_note` as you go and `task_close` (problem and solution are required),
or `log_session` to record work already done in one call."""

MemoryId = Annotated[str, Field(description="A memory id, as returned by remember or recall.")]

# The protocol's errors name the Python calls; an MCP client is told the tools and arguments instead,
# as the command line names its commands and options.
_TOOL_WORDS = (
    ("resume it with store.task() or 'memsite task show'", "continue it with task_note"),
    ("close it with task.abandon(reason)", "close it with task_close(abandon=REASON)"),
    ("store.task(type, keywords)", "task_start(type, keywords)"),
    ("store.task(...)", "task_start(type, keywords)"),
    ("call task.problem(...) and task.solution(...)", "give problem and solution"),
    ("call task.problem(...)", "give problem"), ("call task.solution(...)", "give solution"),
)


def tool_error(message: str) -> CallToolResult:
    """A tool error whose text is ``message`` (built from the wire form, which both SDK majors read)."""
    return CallToolResult.model_validate({"content": [{"type": "text", "text": message}], "isError": True})


def errors_as_tool_errors(func: F, lock: threading.Lock) -> F:
    """Run one call at a time; a ``MemsiteError`` becomes a tool error with the CLI's one-line message."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with lock:
            try:
                return func(*args, **kwargs)
            except MemsiteError as exc:
                return tool_error(reworded(str(exc), _TOOL_WORDS))

    return wrapper  # type: ignore[return-value]  # wraps F, same signature


def arguments_refused(tool: str, error: ValidationError) -> str:
    """One line naming each argument the call got wrong: "remember: argument 'tags': Input should be a valid list"."""
    problems = []
    for detail in error.errors():
        where = ".".join(str(part) for part in detail["loc"]) or "arguments"
        what = "is required" if detail["type"] == "missing" else detail["msg"]
        problems.append(f"argument '{where}': {what}")
    return f"{tool}: {'; '.join(problems)}"


class _MemsiteServer(_Server):
    """The SDK's server, answering a call it cannot make with a tool error of one line."""

    tool_names: list[str]

    async def call_tool(self, name: str, arguments: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if name not in self.tool_names:
            return tool_error(f"unknown tool {name!r}; the tools are {', '.join(sorted(self.tool_names))}")
        try:
            return await super().call_tool(name, arguments, *args, **kwargs)
        except Exception as exc:  # the SDK wraps what the arguments broke in its own error
            if isinstance(exc.__cause__, ValidationError):
                return tool_error(arguments_refused(name, exc.__cause__))
            raise


def summary(memory: Memory) -> dict[str, Any]:
    return {"id": memory.id, "short_id": short_id(memory.id), "category": memory.category, "abstract": memory.abstract,
            "agent": memory.agent, "created": format_time(memory.created), "updated": format_time(memory.updated)}


def build_server(store: MemoryStore) -> Any:
    """An MCP server whose tools use ``store`` as ``store.agent``.

    The SDK's ``MCPServer``, or ``FastMCP`` on mcp 1.x."""
    server = _MemsiteServer("memsite", instructions=INSTRUCTIONS, log_level="WARNING")
    server.tool_names = []
    one_at_a_time = threading.Lock()

    def tool(func: F) -> F:
        server.tool(structured_output=False)(errors_as_tool_errors(func, one_at_a_time))
        server.tool_names.append(func.__name__)
        return func

    @tool
    def remember(
        content: Annotated[str, Field(description="What to remember: one self-contained statement "
                                                  "(Markdown; the first line is its summary).")],
        category: Annotated[str, Field(description="profile, preferences, entities, events, cases, patterns "
                                                   "or general (aliases like user_pref or bug work too).")] = "general",
        tags: Annotated[list[str], Field(description="Words to file it under.")] = [],
        abstract: Annotated[str | None, Field(description="A one-line summary; default: the first line.")] = None,
        pinned: Annotated[bool, Field(description="Keep it forever: exempt from decay and trimming.")] = False,
        supersedes: Annotated[str | None, Field(description="The id of a memory this one replaces because it is "
                                                            "no longer true (it is kept, marked superseded).")] = None,
    ) -> dict[str, Any]:
        """Store a memory in its own git commit.

        Returns its id, the action (created; merged into a near-duplicate, which keeps
        its id; or skipped as an exact duplicate) and the commit. Credentials, empty
        text and unknown categories are refused and nothing is written. When a fact
        changed (a new manager, a new address), give the old memory's id as
        `supersedes`: recall then returns only the new one.
        """
        memory = store.remember(content, category=category, tags=tags, abstract=abstract, pinned=pinned,
                                source=f"mcp:{store.agent}", supersedes=supersedes)
        return {"id": memory.id, "short_id": short_id(memory.id), "action": memory.action, "commit": memory.commit,
                "category": memory.category, "supersedes": memory.supersedes}

    @tool
    def recall(
        query: Annotated[str, Field(description="What you want to know, in your own words.")],
        category: Annotated[str | None, Field(description="Only this category.")] = None,
        limit: Annotated[int, Field(description="At most this many results.", ge=1, le=50)] = 5,
        since: Annotated[str | None, Field(description="Only memories written since then: 2026-03-01, "
                                                       "'2 weeks ago', 'yesterday'.")] = None,
        until: Annotated[str | None,
                         Field(description="Only memories written until then (a date: to its end).")] = None,
    ) -> dict[str, Any]:
        """Find the memories that best answer a query, best first (relevance first; recency orders close ones).

        Each result has the memory's id (give it to `read` for the full text), its
        abstract, when it was written (created) and last changed (updated), and its score.
        """
        hits = store.recall(query, limit=limit, category=category, since=since, until=until)
        return {"results": [{**summary(h.memory), "score": round(h.score, 4), "relevance": round(h.relevance, 4)}
                            for h in hits]}

    @tool
    def read(id: MemoryId) -> dict[str, Any]:
        """The full memory with this id: its text and every field."""
        memory = store.get(id)
        return {**memory_fields(memory), "content": memory.content, "commit": memory.commit}

    @tool
    def recent(
        limit: Annotated[int, Field(description="How many.", ge=1, le=100)] = 10,
        agent: Annotated[str | None, Field(description="Only memories written by this agent.")] = None,
    ) -> dict[str, Any]:
        """The newest memories, newest first."""
        memories = store.list(agent=agent)[-limit:]
        return {"memories": [summary(m) for m in reversed(memories)]}

    @tool
    def update(
        id: MemoryId,
        content: Annotated[str | None, Field(description="The new full text.")] = None,
        abstract: Annotated[str | None, Field(description="A new one-line summary.")] = None,
        category: Annotated[str | None, Field(description="Move it to this category.")] = None,
        tags: Annotated[list[str] | None, Field(description="Replace its tags.")] = None,
        pinned: Annotated[bool | None, Field(description="Pin or unpin it.")] = None,
    ) -> dict[str, Any]:
        """Change a memory in one commit; it keeps its id. Only the fields given change."""
        changes = {name: value for name, value in (("content", content), ("abstract", abstract), ("category", category),
                                                   ("tags", tags), ("pinned", pinned)) if value is not None}
        memory = store.update(id, **changes)
        return {"id": memory.id, "short_id": short_id(memory.id), "commit": memory.commit, "category": memory.category,
                "abstract": memory.abstract}

    @tool
    def forget(id: MemoryId, reason: Annotated[str, Field(description="Why it is forgotten (kept in the commit).")]
               ) -> dict[str, Any]:
        """Delete a memory in one commit; git history keeps it."""
        return {"id": id, "commit": store.forget(id, reason=reason)}

    @tool
    def core(lines: Annotated[int | None, Field(description="At most this many lines.", ge=0)] = None) -> str:
        """The core memory to load at the start of work: world state, pinned memories, your recent memories."""
        return store.load_core(lines=lines)

    @tool
    def world_get(key: Annotated[str | None, Field(description="One key; all keys when omitted.")] = None
                  ) -> dict[str, Any]:
        """The shared world state every agent sees: keyed facts like deploy.target or ci.status."""
        values = store.world.read()
        if key is None:
            return values
        if key not in values:
            raise NotFound(f"no world key {key!r}; world_get without a key lists them")
        return {key: values[key]}

    @tool
    def world_set(
        values: Annotated[dict[str, str], Field(description="Keys to set and their new values.")] = {},
        remove: Annotated[list[str], Field(description="Keys to remove.")] = [],
    ) -> dict[str, Any]:
        """Merge keys into the shared world state in one commit; keys not named are kept."""
        return {"commit": store.world.merge(values, remove=remove)}

    @tool
    def task_start(
        type: Annotated[str, Field(description="The kind of work: debug, fix, feature, refactor...")],
        keywords: Annotated[list[str], Field(description="What it is about, a few short phrases.")] = [],
        plan: Annotated[list[str] | None, Field(description="The TODO items.")] = None,
    ) -> dict[str, Any]:
        """Start a task (or resume your unfinished one of the same type and keywords).

        Returns its TODO and the known patterns from earlier tasks that match it.
        Only one task per agent is open at a time; close it with `task_close`.
        """
        return _with_task(store, lambda t: None, type, keywords, plan)

    @tool
    def task_note(
        done: Annotated[str | None, Field(description="A TODO item now done (its exact text).")] = None,
        note: Annotated[str | None, Field(description="What was found, noted on that item.")] = None,
        add: Annotated[list[str], Field(description="TODO items to add.")] = [],
        problem: Annotated[str | None, Field(description="The problem the task addresses.")] = None,
        solution: Annotated[str | None, Field(description="How it was solved.")] = None,
        learn: Annotated[list[str], Field(description="Learnings; one starting 'pattern:' "
                                                       "joins your knowledge.")] = [],
    ) -> dict[str, Any]:
        """Record progress on your open task; it is saved at once and survives a restart."""
        def note_progress(t: Any) -> None:
            for item in add:
                t.add(item)
            if done is not None:
                t.check(done, note=note)
            _record(t, problem, solution, learn)

        return _with_task(store, note_progress)

    @tool
    def task_close(
        problem: Annotated[str | None, Field(description="The problem the task addressed.")] = None,
        solution: Annotated[str | None, Field(description="How it was solved.")] = None,
        learn: Annotated[list[str], Field(description="Learnings; 'pattern: ...' joins your knowledge.")] = [],
        world: Annotated[dict[str, str], Field(description="World state keys to set.")] = {},
        abandon: Annotated[str | None, Field(description="Close without finishing, for this reason.")] = None,
    ) -> dict[str, Any]:
        """Close your open task in one commit: session record, knowledge, world state, cleared TODO.

        Problem and solution are required (given here or in `task_note`); if a step
        cannot be done nothing is committed and the error lists what is missing.
        """
        return _with_task(store, lambda t: _close(t, problem, solution, learn, world, abandon), closing=True)

    @tool
    def log_session(
        type: Annotated[str, Field(description="The kind of work: debug, fix, feature...")],
        keywords: Annotated[list[str], Field(description="What it was about, a few short phrases.")],
        problem: Annotated[str, Field(description="The problem addressed.")],
        solution: Annotated[str, Field(description="How it was solved.")],
        learn: Annotated[list[str], Field(description="Learnings; 'pattern: ...' joins your knowledge.")] = [],
        world: Annotated[dict[str, str], Field(description="World state keys to set.")] = {},
    ) -> dict[str, Any]:
        """Record work already done as a closed task, in one commit (start and close at once)."""
        return _with_task(store, lambda t: _close(t, problem, solution, learn, world, None), type, keywords,
                          closing=True)

    return server


def _with_task(store: MemoryStore, action: Callable[[Any], Any], type: str | None = None,
               keywords: list[str] | None = None, plan: list[str] | None = None, *, closing: bool = False
               ) -> dict[str, Any]:
    """Open (or resume) the agent's task, run ``action`` on it, let go of it: the CLI's way across processes."""
    task = store.task(type, keywords or [], plan=plan)
    try:
        action(task)
    finally:
        task.release()
    if closing:
        return {"session": task.session, "commit": task.commit}
    return {"type": task.type, "keywords": task.keywords, "resumed": task.resumed, "rounds": task.rounds,
            "todo": [{"item": text, "done": done, "note": note} for text, done, note in task.todo],
            "known_patterns": task.known_patterns}


def _record(task: Any, problem: str | None, solution: str | None, learn: list[str]) -> None:
    if problem is not None:
        task.problem(problem)
    if solution is not None:
        task.solution(solution)
    for learning in learn:
        task.learn(learning)


def _close(task: Any, problem: str | None, solution: str | None, learn: list[str], world: dict[str, str],
           abandon: str | None) -> None:
    if abandon is not None:
        task.abandon(abandon)
        return
    _record(task, problem, solution, learn)
    if world:
        task.world(world)
    task.finish()


def serve(store: MemoryStore) -> None:
    """Serve ``store`` over stdio until the client closes the connection."""
    build_server(store).run("stdio")
