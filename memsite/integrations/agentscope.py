"""memsite as an AgentScope agent's long-term memory (the ``memsite[agentscope]`` extra).

AgentScope 2.x keeps long-term memory in middleware on ``agentscope.agent.Agent``::

    from agentscope.agent import Agent
    from agentscope.tool import Toolkit
    from memsite import MemoryStore
    from memsite.integrations.agentscope import MemsiteMiddleware

    memory = MemsiteMiddleware(MemoryStore("agent-memory", agent="friday"), mode="both")
    agent = Agent(name="Friday", system_prompt="...", model=model,
                  toolkit=Toolkit(tools=await memory.list_tools()), middlewares=[memory])

It follows the shape of AgentScope's own ``Mem0Middleware``. In
``static_control`` the middleware recalls what the user's message is about
before each reply (the hits go into the agent's context as a hint) and
records the exchange after it; in ``agent_control`` it offers the model the
tools ``record_to_memory`` and ``retrieve_from_memory`` (the names of the
memory-module specification in docs/design.md), which need no permission step; ``both`` does both. A tool call the
tool's schema refuses (a missing or unknown argument) is answered by
AgentScope with an error the model reads, and the reply goes on.

AgentScope 1.x (``agentscope<2``) has ``LongTermMemoryBase``
for ``ReActAgent`` instead: :class:`MemsiteLongTermMemory`, the same
behaviour in that shape. Which of the two this module defines depends on the
AgentScope installed; asking for the other names the version found.

Every write is a git commit authored by the store's agent. The store's calls
run in a worker thread, so an extractor's LLM call does not block the event loop.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import AsyncGenerator, Callable, Iterable
from importlib import metadata
from typing import TYPE_CHECKING, Any

from ..api import storage_of
from ..features.recall import TOOLS, format_hits, record_items, superseded
from ..foundation.errors import MemsiteError
from . import unusable

try:  # AgentScope 2.x
    from agentscope.event import ReplyStartEvent
    from agentscope.message import AssistantMsg, HintBlock, Msg, TextBlock, ToolResultState
    from agentscope.middleware import MiddlewareBase
    from agentscope.permission import PermissionBehavior, PermissionDecision
    from agentscope.tool import ToolBase, ToolChunk

    MAJOR = 2
except ImportError:
    try:  # AgentScope 1.x
        from agentscope.memory import LongTermMemoryBase
        from agentscope.message import Msg, TextBlock
        from agentscope.tool import ToolResponse

        MAJOR = 1
    except ImportError as exc:
        raise ImportError(unusable("memsite's AgentScope memory", "agentscope", "1.0.9 or later", "agentscope",
                                   exc)) from exc

if TYPE_CHECKING:
    from ..api import MemoryStore
    from ..features.extract import Extractor

log = logging.getLogger("memsite")
RETRIEVED = "long_term_memory"  # the name of the message carrying what was recalled before a reply
MODES = ("static_control", "agent_control", "both")
TOOL_INSTRUCTIONS = """\
## Long-term memory

You have a long-term memory kept across conversations. Call `retrieve_from_memory` with a few keywords
when the conversation may depend on something from an earlier one (a preference, a name, a decision);
call `record_to_memory` with self-contained statements worth keeping."""


# --- what both majors do --------------------------------------------------------------


def _store_messages(store: MemoryStore, messages: list[dict[str, str]], category: str,
                    extractor: Extractor | None) -> dict[str, int]:
    """Record user and assistant messages in one commit: through ``extractor``, else one memory each."""
    if extractor is not None:
        return store.ingest(messages, extractor)
    with store.transaction(f"Record {len(messages)} messages from {store.agent}") as tx:
        for message in messages:
            tx.remember(message["content"], category=category, source=f"agentscope:{store.agent}")
    return tx.stats


def _record_items(store: MemoryStore, category: str, thinking: str, content: Iterable[str],
                  supersedes: str | None = None) -> str:
    """``record_to_memory``: each item a memory of ``category``, one commit; the answer the model reads.

    ``supersedes``: with one item, the id of the memory it replaces.
    """
    items = [content] if isinstance(content, str) else list(content)
    try:
        replaced = superseded({"supersedes": supersedes, "content": items})
    except ValueError as exc:
        return f"Error: {exc}"
    return record_items(storage_of(store), thinking, items, category, supersedes=replaced)


def _retrieve_items(store: MemoryStore, keywords: Iterable[str], limit: int) -> str:
    """``retrieve_from_memory``: the best matches for the keywords, as text the model reads."""
    words = [keywords] if isinstance(keywords, str) else list(keywords)
    hits = store.recall(" ".join(words), limit)
    if not hits:
        return f"No memory matches {', '.join(words)}."
    return f"Memories matching {', '.join(words)}:\n{format_hits(hits)}"


def _text(msg: Any) -> str:
    return (msg.get_text_content() or "").strip()


def _schema(name: str) -> dict[str, Any]:
    return next(tool for tool in TOOLS if tool["name"] == name)


def __getattr__(name: str) -> Any:
    """The class of the other AgentScope major: an error naming the version installed."""
    other = {"MemsiteMiddleware": (2, "AgentScope 2.x (Python 3.11+)"),
             "MemsiteLongTermMemory": (1, "AgentScope 1.x (agentscope<2)")}
    if name in other and other[name][0] != MAJOR:
        raise ImportError(f"{name} is for {other[name][1]}; agentscope {metadata.version('agentscope')} is "
                          f"installed: use {'MemsiteMiddleware' if MAJOR == 2 else 'MemsiteLongTermMemory'}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if MAJOR == 2:

    class MemsiteMiddleware(MiddlewareBase):
        """AgentScope 2.x middleware giving an agent long-term memory kept in a memsite repository.

        Args:
            store: the memory repository, opened as the agent that writes.
            mode: ``static_control`` (recall before each reply, record after
                it), ``agent_control`` (the model calls ``record_to_memory`` and
                ``retrieve_from_memory``) or ``both``.
            extractor: when given, the exchange recorded after a reply goes
                through it (``store.ingest``: candidates deduplicated, secrets
                refused); without one, the user's and the agent's text are each
                stored.
            category: where recorded exchanges and ``record_to_memory`` items go.
            limit: the most memories recalled before a reply or by the tool.

        Raises:
            ValueError: an unknown ``mode``. InvalidInput: an unknown ``category``.
        """

        def __init__(self, store: MemoryStore, mode: str = "both", *, extractor: Extractor | None = None,
                     category: str = "general", limit: int = 5) -> None:
            if mode not in MODES:
                raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
            store.config.route(category)  # an unknown category fails now, not at the first record
            self.store = store
            self.mode = mode
            self.extractor = extractor
            self.category = category
            self.limit = limit

        async def on_reply(self, agent: Any, input_kwargs: dict[str, Any],
                           next_handler: Callable[..., AsyncGenerator[Any, None]]) -> AsyncGenerator[Any, None]:
            """Recall before the reply (into the agent's context), record the exchange after it."""
            if self.mode == "agent_control":
                async for item in next_handler(**input_kwargs):
                    yield item
                return
            inputs = input_kwargs.get("inputs")
            said = [_text(m) for m in (inputs if isinstance(inputs, list) else [inputs])
                    if isinstance(m, Msg) and m.role == "user"]
            query = "\n".join(text for text in said if text)
            recalled = await asyncio.to_thread(self._recall, query) if query else ""
            answer = None
            async for item in next_handler(**input_kwargs):
                if recalled and isinstance(item, ReplyStartEvent):  # the user's message is in the context now
                    agent.state.context.append(AssistantMsg(name=RETRIEVED, content=[HintBlock(hint=recalled)]))
                    recalled = ""
                if isinstance(item, Msg) and item.role == "assistant":
                    answer = item
                yield item
            exchange = [{"role": "user", "content": query}] if query else []
            if answer is not None and _text(answer):
                exchange.append({"role": "assistant", "content": _text(answer)})
            if query and len(exchange) == 2:
                try:
                    await asyncio.to_thread(_store_messages, self.store, exchange, self.category, self.extractor)
                except MemsiteError as exc:  # (a credential in the exchange, say): the reply stands, unrecorded
                    log.warning("memsite: the exchange was not recorded: %s", exc)

        def _recall(self, query: str) -> str:
            hits = self.store.recall(query, self.limit)
            return f"<{RETRIEVED}>\n{format_hits(hits)}\n</{RETRIEVED}>" if hits else ""

        async def on_system_prompt(self, agent: Any, current_prompt: str) -> str:
            """Tell the model about its memory tools (not in ``static_control``, where it has none)."""
            return current_prompt if self.mode == "static_control" else f"{current_prompt}\n\n{TOOL_INSTRUCTIONS}"

        async def list_tools(self) -> list[ToolBase]:
            """``record_to_memory`` and ``retrieve_from_memory``; none in ``static_control``."""
            return [] if self.mode == "static_control" else [_RecordToMemory(self), _RetrieveFromMemory(self)]

    class _MemoryTool(ToolBase):
        """A memory tool of the middleware: allowed without asking, like AgentScope's own memory tools."""

        is_external_tool = False
        is_state_injected = False
        is_mcp = False
        mcp_name = None

        def __init__(self, middleware: MemsiteMiddleware) -> None:
            super().__init__()
            self.middleware = middleware
            spec = _schema(self.name)
            self.description = spec["description"]
            self.input_schema = copy.deepcopy(spec["parameters"])

        async def check_permissions(self, *args: Any, **kwargs: Any) -> PermissionDecision:
            return PermissionDecision(behavior=PermissionBehavior.ALLOW,
                                      message="memsite long-term memory: allowed without asking")

        async def call(self, **kwargs: Any) -> ToolChunk:
            try:
                answer = await asyncio.to_thread(self.run, **kwargs)
            except MemsiteError as exc:
                return ToolChunk(content=[TextBlock(type="text", text=f"Error: {exc}")], state=ToolResultState.ERROR)
            return ToolChunk(content=[TextBlock(type="text", text=answer)])

        def run(self, **kwargs: Any) -> str:
            raise NotImplementedError

    class _RecordToMemory(_MemoryTool):
        name = "record_to_memory"
        is_concurrency_safe = False
        is_read_only = False

        def run(self, thinking: str, content: list[str], supersedes: str | None = None) -> str:  # type: ignore[override]  # the model sees these names
            return _record_items(self.middleware.store, self.middleware.category, thinking, content, supersedes)

    class _RetrieveFromMemory(_MemoryTool):
        name = "retrieve_from_memory"
        is_concurrency_safe = True
        is_read_only = True

        def run(self, keywords: list[str]) -> str:  # type: ignore[override]  # the model sees these names
            return _retrieve_items(self.middleware.store, keywords, self.middleware.limit)

else:

    def _worth_recording(msg: Msg) -> bool:
        """A user or assistant message; not what retrieve() put into the prompt, nor one of the agent's hints."""
        return msg.role in ("user", "assistant") and msg.name != RETRIEVED and \
            not _text(msg).startswith("<system-hint>")

    def _response(text: str) -> ToolResponse:
        return ToolResponse(content=[TextBlock(type="text", text=text)])

    class MemsiteLongTermMemory(LongTermMemoryBase):
        """AgentScope 1.x long-term memory kept in a memsite repository, for ``ReActAgent``.

        ``ReActAgent(..., long_term_memory=MemsiteLongTermMemory(store), long_term_memory_mode="both")``:
        in ``static_control`` the agent calls ``retrieve(msg)`` before each
        reply and ``record(msgs)`` after it, with its whole short-term memory;
        in ``agent_control`` the model calls ``record_to_memory`` and
        ``retrieve_from_memory``, which answer with a ``ToolResponse``.

        Args:
            store: the memory repository, opened as the agent that writes.
            extractor: when given, ``record`` sends the conversation through it;
                without one, each user and assistant message's text is stored.
            category: where ``record`` without an extractor and
                ``record_to_memory`` store what they are given.
            limit: the most memories ``retrieve`` puts into the prompt.
        """

        def __init__(self, store: MemoryStore, *, extractor: Extractor | None = None, category: str = "general",
                     limit: int = 5) -> None:
            super().__init__()
            store.config.route(category)  # an unknown category fails now, not at the first record
            self.store = store
            self.extractor = extractor
            self.category = category
            self.limit = limit
            self._recorded: set[str] = set()  # ids of the messages already recorded: the agent passes them all again

        async def record(self, msgs: list[Msg | None], **kwargs: Any) -> dict[str, int]:
            """Record the user and assistant messages not recorded before; one commit.

            Returns:
                How many memories were ``created``, ``merged`` or ``skipped`` (and
                ``refused``, with an extractor).
            """
            fresh = [m for m in ([msgs] if isinstance(msgs, Msg) else msgs or [])
                     if m is not None and m.id not in self._recorded and _worth_recording(m)]
            messages = [{"role": m.role, "content": text} for m in fresh if (text := _text(m))]
            if not messages:
                return {"created": 0, "merged": 0, "skipped": 0}
            stats = await asyncio.to_thread(_store_messages, self.store, messages, self.category, self.extractor)
            self._recorded.update(m.id for m in fresh)
            return stats

        async def retrieve(self, msg: Msg | list[Msg] | None, limit: int | None = None, **kwargs: Any) -> str:
            """Memories relevant to the message(s), as text for the prompt; '' when none match."""
            texts = [_text(m) for m in ([msg] if isinstance(msg, Msg) else msg or []) if m is not None]
            query = "\n".join(t for t in texts if t)
            if not query.strip():
                return ""
            hits = await asyncio.to_thread(self.store.recall, query, limit or self.limit)
            return format_hits(hits)

        async def record_to_memory(self, thinking: str, content: list[str], supersedes: str | None = None,
                                   **kwargs: Any) -> ToolResponse:
            """Use this function to record important information that you may
            need later. The target content should be specific and concise, e.g.
            who, when, where, do what, why, how, etc.

            Args:
                thinking (`str`):
                    Your thinking and reasoning about what to record.
                content (`list[str]`):
                    The content to remember, which is a list of strings.
                supersedes (`str`, optional):
                    With one item in content: the id of a memory it replaces
                    because that one is no longer true.
            """
            try:
                return _response(await asyncio.to_thread(_record_items, self.store, self.category, thinking, content,
                                                         supersedes))
            except MemsiteError as exc:
                return _response(f"Error: {exc}")

        async def retrieve_from_memory(self, keywords: list[str], limit: int = 5, **kwargs: Any) -> ToolResponse:
            """Retrieve the memory based on the given keywords.

            Args:
                keywords (`list[str]`):
                    The keywords to search for in the memory, which should be
                    specific and concise, e.g. the person's name, the date, the
                    location, etc.
                limit (`int`, optional):
                    The maximum number of memories to retrieve. Defaults to 5.
            """
            try:
                return _response(await asyncio.to_thread(_retrieve_items, self.store, keywords, limit))
            except MemsiteError as exc:
                return _response(f"Error: {exc}")
