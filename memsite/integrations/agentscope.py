"""memsite as AgentScope's long-term memory (the ``memsite[agentscope]`` extra).

    from agentscope.agent import ReActAgent
    from memsite import MemoryStore
    from memsite.integrations.agentscope import MemsiteLongTermMemory

    memory = MemsiteLongTermMemory(MemoryStore("agent-memory", agent="friday"))
    agent = ReActAgent(..., long_term_memory=memory, long_term_memory_mode="both")

It follows AgentScope's ``LongTermMemoryBase`` as ``ReActAgent`` uses it. In
``static_control`` the agent calls ``retrieve(msg)`` before each reply (what
it returns goes into the prompt) and ``record(msgs)`` after it, with its whole
short-term memory; in ``agent_control`` the model calls the tool functions
``record_to_memory`` and ``retrieve_from_memory``, which answer with a
``ToolResponse``; ``both`` does both. Every write is a git commit authored by
the store's agent. The store's calls run in a worker thread, so an extractor's
LLM call does not block the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from agentscope.memory import LongTermMemoryBase
from agentscope.message import Msg, TextBlock
from agentscope.tool import ToolResponse

from ..errors import MemsiteError
from ..recall import format_hits

if TYPE_CHECKING:
    from ..api import MemoryStore
    from ..extract import Extractor

RETRIEVED = "long_term_memory"  # the name ReActAgent gives the message carrying what retrieve() returned


class MemsiteLongTermMemory(LongTermMemoryBase):
    """AgentScope long-term memory kept in a memsite repository.

    Args:
        store: the memory repository, opened as the agent that writes.
        extractor: when given, ``record`` sends the conversation through it
            (``store.ingest``: candidates deduplicated, secrets refused);
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

    # --- developer-controlled (static_control) -------------------------------

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
        stats = await asyncio.to_thread(self._store_messages, messages)
        self._recorded.update(m.id for m in fresh)
        return stats

    def _store_messages(self, messages: list[dict[str, str]]) -> dict[str, int]:
        if self.extractor is not None:
            return self.store.ingest(messages, self.extractor)
        with self.store.transaction(f"Record {len(messages)} messages from {self.store.agent}") as tx:
            for message in messages:
                tx.remember(message["content"], category=self.category, source=f"agentscope:{self.store.agent}")
        return tx.stats

    async def retrieve(self, msg: Msg | list[Msg] | None, limit: int | None = None, **kwargs: Any) -> str:
        """Memories relevant to the message(s), as text for the prompt; '' when none match."""
        texts = [_text(m) for m in ([msg] if isinstance(msg, Msg) else msg or []) if m is not None]
        query = "\n".join(t for t in texts if t)
        if not query.strip():
            return ""
        hits = await asyncio.to_thread(self.store.recall, query, limit or self.limit)
        return format_hits(hits)

    # --- agent-controlled (agent_control): tool functions ---------------------

    async def record_to_memory(self, thinking: str, content: list[str], **kwargs: Any) -> ToolResponse:
        """Use this function to record important information that you may
        need later. The target content should be specific and concise, e.g.
        who, when, where, do what, why, how, etc.

        Args:
            thinking (`str`):
                Your thinking and reasoning about what to record.
            content (`list[str]`):
                The content to remember, which is a list of strings.
        """
        try:
            answer = await asyncio.to_thread(self._record_items, thinking, content)
        except MemsiteError as exc:
            answer = f"Error: {exc}"
        return _response(answer)

    def _record_items(self, thinking: str, content: Iterable[str]) -> str:
        items = [content] if isinstance(content, str) else list(content)
        with self.store.transaction(f"Record to memory: {' '.join(thinking.split())[:50] or 'from the agent'}") as tx:
            ids = [tx.remember(item, category=self.category, source=f"tool:{self.store.agent}").id for item in items]
        stats = tx.stats
        return (f"Recorded {len(items)} item(s): {stats['created']} new, {stats['merged']} merged into existing "
                f"memories, {stats['skipped']} already known. Ids: {', '.join(ids)}")

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
        words = [keywords] if isinstance(keywords, str) else list(keywords)
        try:
            hits = await asyncio.to_thread(self.store.recall, " ".join(words), limit)
        except MemsiteError as exc:
            return _response(f"Error: {exc}")
        if not hits:
            return _response(f"No memory matches {', '.join(words)}.")
        return _response(f"Memories matching {', '.join(words)}:\n{format_hits(hits)}")


def _text(msg: Msg) -> str:
    return (msg.get_text_content() or "").strip()


def _worth_recording(msg: Msg) -> bool:
    """A user or assistant message; not what retrieve() put into the prompt, nor one of the agent's hints."""
    return msg.role in ("user", "assistant") and msg.name != RETRIEVED and \
        not _text(msg).startswith("<system-hint>")


def _response(text: str) -> ToolResponse:
    return ToolResponse(content=[TextBlock(type="text", text=text)])
