"""memsite as Google ADK's memory service (the ``memsite[adk]`` extra).

    from google.adk.agents import Agent
    from google.adk.runners import Runner
    from google.adk.tools import load_memory
    from memsite import MemoryStore
    from memsite.integrations.adk import MemsiteMemoryService

    runner = Runner(agent=Agent(name="helper", model="gemini-2.5-flash", tools=[load_memory]), app_name="travel",
                    session_service=..., memory_service=MemsiteMemoryService(MemoryStore("agent-memory",
                                                                                         agent="helper")))

:class:`MemsiteMemoryService` is a ``google.adk.memory.BaseMemoryService``.
``add_session_to_memory`` turns a session's events into memories, in one
commit by the store's agent: through memsite's :class:`~memsite.Extractor`
when a language model is configured (``extractor=``, or ``MEMSITE_LLM_*``
in the environment), otherwise one memory per fact the user stated about
themselves, found without a model (:func:`stated_facts`). A session added
again adds nothing it added before: a text already remembered for the same
app and user is skipped (memsite's own dedup would compare across users).
``search_memory`` is memsite's recall, within the app and the user, each
result with the date its memory was written. ``add_events_to_memory``,
``add_memory`` and ``delete_memory`` work too.

A memory carries its app and user as tags (``adk``, ``adk-app-<app>``,
``adk-user-<user>``; a name that is no valid tag is given by a hash) and, as
they were given, in its frontmatter (``adk_app``, ``adk_user``), so one
user's search never returns another's memories.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..api import storage_of
from ..features.extract import Extractor
from ..features.llm import OpenAICompatible
from ..foundation import inputs
from ..foundation.errors import InvalidInput, NotFound
from ..foundation.record import format_time, normalize_content, one_line
from . import unusable

try:
    from google.adk.memory import BaseMemoryService
    from google.adk.memory.base_memory_service import SearchMemoryResponse
    from google.adk.memory.memory_entry import MemoryEntry
    from google.genai import types
except ImportError as exc:
    raise ImportError(unusable("memsite's ADK memory service", "google-adk", "2.13 or later", "adk", exc)) from exc

if TYPE_CHECKING:
    from ..api import MemoryStore
    from ..foundation.record import Memory
    from ..storage import Transaction

TAG = "adk"
SEARCH_LIMIT = 10  # as ADK's InMemoryMemoryService


class MemsiteMemoryService(BaseMemoryService):
    """An ADK memory service whose memories are in a memsite repository.

    Args:
        store: the memory repository, opened as the agent that writes (the commits' author).
        extractor: turns a session into memories with a language model; default:
            one for the model ``MEMSITE_LLM_*`` describes, or none (facts the user
            stated are found without a model).
        limit: the most memories a search returns.

    Raises:
        ConfigError: a ``MEMSITE_LLM_*`` variable holds something it cannot mean.
    """

    def __init__(self, store: MemoryStore, *, extractor: Extractor | None = None, limit: int = SEARCH_LIMIT) -> None:
        self.store = store
        if extractor is None:
            llm = OpenAICompatible.from_env()
            extractor = None if llm is None else Extractor(llm, config=store.config)
        self.extractor = extractor
        self.limit = limit
        self._lock = threading.Lock()  # one write or search at a time (ADK may run tools concurrently)

    # --- BaseMemoryService ------------------------------------------------------------

    async def add_session_to_memory(self, session: Any) -> None:
        """Remember what the session's events say (see the module's documentation); one commit."""
        await self.add_events_to_memory(app_name=session.app_name, user_id=session.user_id, events=session.events,
                                        session_id=session.id)

    async def add_events_to_memory(self, *, app_name: str, user_id: str, events: Sequence[Any],
                                   session_id: str | None = None,
                                   custom_metadata: Mapping[str, object] | None = None) -> None:
        """Remember what ``events`` say, as for a session; one commit."""
        messages = [{"role": "user" if event.author == "user" else "assistant", "content": text}
                    for event in events if (text := _text(event.content))]
        await asyncio.to_thread(self._remember, app_name, user_id, session_id, messages)

    async def add_memory(self, *, app_name: str, user_id: str, memories: Sequence[MemoryEntry],
                         custom_metadata: Mapping[str, object] | None = None) -> None:
        """Remember each entry's text as it is; one commit."""
        texts = [text for entry in memories if (text := _text(entry.content))]
        await asyncio.to_thread(self._write, app_name, user_id, None, [(text, "general", ()) for text in texts])

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        """memsite's recall within the app and the user: the best memories first, each with its date."""
        return await asyncio.to_thread(self.search, app_name, user_id, query)

    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: str | None = None) -> None:
        """Forget the memory ``memory_id`` of this app and user, in one commit.

        Raises:
            NotFound: no such memory of this app and user.
        """
        await asyncio.to_thread(self._delete, app_name, user_id, memory_id)

    # --- the work, in a worker thread -------------------------------------------------

    def search(self, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        """:meth:`search_memory`, called directly."""
        with self._lock:
            hits = self.store.recall(query, limit=self.limit, tags=_scope_tags(app_name, user_id))
        return SearchMemoryResponse(memories=[_entry(hit.memory, hit.score) for hit in hits
                                              if _in_scope(hit.memory, app_name, user_id)])

    def _remember(self, app_name: str, user_id: str, session_id: str | None, messages: list[dict[str, str]]) -> None:
        if self.extractor is not None:
            found = [(c.content, c.category, c.tags) for c in self.extractor.extract(messages)]
        else:
            found = [(fact, category, ()) for message in messages if message["role"] == "user"
                     for fact, category in stated_facts(message["content"])]
        self._write(app_name, user_id, session_id, found)

    def _write(self, app_name: str, user_id: str, session_id: str | None,
               found: Iterable[tuple[str, str, Iterable[str]]]) -> None:
        """Remember what is new for this app and user, in one commit (none when nothing is)."""
        keyed = [(content, category, tags, _key(app_name, user_id, content)) for content, category, tags in found]
        if not keyed:
            return
        scope = _scope_tags(app_name, user_id)
        source = f"adk session {session_id}" if session_id else "adk"

        def body(tx: Transaction) -> None:
            # memsite's dedup is by category, across users: this one is by app and user, exact.
            known = {key for _, _, key in storage_of(self.store).catalog.with_field("adk_key")}
            new = 0
            for content, category, tags, key in keyed:
                if key not in known:
                    known.add(key)
                    tx.remember(content, category=category, tags=[*_valid_tags(tags), *scope], source=source,
                                dedupe=False, extra={"adk_app": app_name, "adk_user": user_id, "adk_key": key})
                    new += 1
            tx.message = one_line(f"ADK: remember {new} for user {user_id} of {app_name}")[:200]
            tx.trailers += [("ADK-App", one_line(app_name)), ("ADK-User", one_line(user_id))]
            if session_id:
                tx.trailers.append(("ADK-Session", one_line(session_id)))

        with self._lock:
            self.store.write(body)

    def _delete(self, app_name: str, user_id: str, memory_id: str | None) -> None:
        with self._lock:
            memory = self.store.get(memory_id) if memory_id else None
            if memory is None or not _in_scope(memory, app_name, user_id):
                raise NotFound(f"no memory {memory_id!r} of app {app_name!r} and user {user_id!r}")
            self.store.forget(memory.id, reason=f"ADK delete_memory ({app_name}, user {user_id})")


# --- facts without a model ------------------------------------------------------------------

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_LEAD_IN = re.compile(r"^(?:please\s+)?(?:remember|note|keep in mind)(?:\s+that)?[:,]?\s+", re.IGNORECASE)
_ABOUT_ME = re.compile(r"^(?:i|i'm|i am|i've|i have|i'd|i was|i will|i'll|my|we|we're|we are|our)\b", re.IGNORECASE)
_ASKING = re.compile(r"^(?:i\s+(?:wonder|think|guess|see|mean|need help|want to know"
                     r"|would like to know|'d like to know)"
                     r"|i\s+(?:want|need)\s+you\b)", re.IGNORECASE)
_PREFERENCE = re.compile(r"\b(?:prefer|like|love|enjoy|hate|dislike|favou?rite|rather|don't like|do not like)\b",
                         re.IGNORECASE)
_PROFILE = re.compile(r"^(?:my name is|i am a|i'm a|i work|i live|i was born|my (?:job|role|title) is)\b",
                      re.IGNORECASE)


def stated_facts(text: str) -> list[tuple[str, str]]:
    """The facts a user states about themselves in ``text``, found without a language model, with their category.

    A fact is a sentence of three words or more that is not a question and
    speaks of the user ("I ...", "I'm ...", "My ...", "We ...", "Our ..."), or
    any sentence after "Remember that" / "Note that" / "Keep in mind".
    Sentences that ask ("I wonder", "I think", "I want you to") are not facts.
    A fact that speaks of liking or preferring is a preference; one that says
    who the user is ("My name is", "I work", "I live"), the profile; any other,
    general.

    Returns:
        (fact, category) pairs, in the order said; the fact as the user wrote it.
    """
    facts: list[tuple[str, str]] = []
    for match in _SENTENCE.finditer(text):
        sentence = match.group().strip()
        if not sentence or sentence.endswith("?"):
            continue
        stated = _LEAD_IN.sub("", sentence)
        if stated == sentence and (not _ABOUT_ME.match(sentence) or _ASKING.match(sentence)):
            continue
        if len(stated.split()) < 3:
            continue
        fact = stated[0].upper() + stated[1:]
        category = "profile" if _PROFILE.match(fact) else "preferences" if _PREFERENCE.search(fact) else "general"
        facts.append((fact, category))
    return facts


# --- helpers ----------------------------------------------------------------------------------


def _text(content: Any) -> str:
    """The text parts of an ADK / genai ``Content``, joined; '' for none."""
    parts = getattr(content, "parts", None) or []
    return "\n".join(part.text for part in parts if getattr(part, "text", None)).strip()


def _scope_tags(app_name: str, user_id: str) -> list[str]:
    return [TAG, _tag("adk-app", app_name), _tag("adk-user", user_id)]


def _tag(prefix: str, name: object) -> str:
    """``<prefix>-<name>`` when that is a valid tag, else ``<prefix>-<hash of name>``."""
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"{prefix.removeprefix('adk-')}: expected a non-empty name, got {name!r}")
    try:
        return inputs.tags([f"{prefix}-{name}"])[0]
    except InvalidInput:
        return f"{prefix}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def _valid_tags(tags: Iterable[str]) -> list[str]:
    """The model's tags that memsite takes (a bad one is dropped, not the memory)."""
    kept: list[str] = []
    for tag in tags:
        try:
            kept += inputs.tags([tag])
        except InvalidInput:
            pass
    return kept


def _key(app_name: str, user_id: str, content: str) -> str:
    """What makes a memory the same one again: its app, its user and its text (as memsite keeps it)."""
    said = "\0".join((app_name, user_id, normalize_content(content)))
    return hashlib.sha256(said.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _in_scope(memory: Memory, app_name: str, user_id: str) -> bool:
    return memory.extra.get("adk_app") == app_name and memory.extra.get("adk_user") == user_id


def _entry(memory: Memory, score: float) -> MemoryEntry:
    return MemoryEntry(id=memory.id, content=types.Content(role="user", parts=[types.Part(text=memory.content)]),
                       author=memory.agent, timestamp=format_time(memory.created),
                       custom_metadata={"category": memory.category, "updated": format_time(memory.updated),
                                        "score": round(score, 4)})
