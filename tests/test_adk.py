"""memsite as Google ADK's memory service, inside ADK's own InMemoryRunner with a scripted model.

The model is a ``BaseLlm`` that follows a script, so the agent really calls
ADK's ``load_memory`` tool, which calls ``search_memory`` on memsite.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk")

from google.adk.agents import LlmAgent
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.adk.tools import load_memory
from google.genai import types

from memsite import Extractor, MemoryStore
from memsite.integrations.adk import MemsiteMemoryService, stated_facts

from .conftest import git
from .test_llm import Endpoint, chat

APP = "travel"


class ScriptedModel(BaseLlm):
    """A model that asks load_memory about a question, answers from what it returns, and notes anything else."""

    model: str = "scripted"
    calls: list[str] = []  # noqa: RUF012 (a pydantic field: each model has its own copy)

    async def generate_content_async(self, llm_request: Any, stream: bool = False
                                     ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1].parts[-1]
        if last.function_response is not None:
            result = last.function_response.response["result"]  # load_memory's LoadMemoryResponse
            memories = [MemoryEntry.model_validate(m) for m in result.memories]
            said = "; ".join(f"{m.content.parts[0].text} ({m.timestamp[:10]})" for m in memories)
            self.calls.append("answer")
            yield _reply(types.Part(text=f"From memory: {said}" if memories else "I don't know yet."))
        elif last.text and last.text.endswith("?"):
            self.calls.append("load_memory")
            yield _reply(types.Part(function_call=types.FunctionCall(name="load_memory", args={"query": last.text})))
        else:
            self.calls.append("note")
            yield _reply(types.Part(text="Noted."))


def _reply(part: types.Part) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=[part]))


async def turn(runner: InMemoryRunner, user: str, session_id: str, text: str) -> str:
    answer = ""
    async for event in runner.run_async(user_id=user, session_id=session_id,
                                        new_message=types.Content(role="user", parts=[types.Part(text=text)])):
        if event.is_final_response() and event.content and event.content.parts:
            answer = event.content.parts[0].text or ""
    return answer


def make_runner(store: MemoryStore) -> tuple[InMemoryRunner, ScriptedModel]:
    model = ScriptedModel(calls=[])
    agent = LlmAgent(name="helper", model=model, instruction="Answer from memory.", tools=[load_memory])
    runner = InMemoryRunner(agent=agent, app_name=APP)
    runner.memory_service = MemsiteMemoryService(store)  # (InMemoryRunner makes an InMemoryMemoryService)
    return runner, model


def test_an_adk_agent_remembers_a_session_and_load_memory_recalls_it_through_memsite(store: MemoryStore) -> None:
    runner, model = make_runner(store)

    async def conversation() -> tuple[str, str, str]:
        first = await runner.session_service.create_session(app_name=APP, user_id="ada")
        await turn(runner, "ada", first.id, "Hi! I prefer window seats on long flights. My name is Ada Byron. "
                                            "What a day.")
        await turn(runner, "ada", first.id, "Remember that the company pays for lounge access.")
        session = await runner.session_service.get_session(app_name=APP, user_id="ada", session_id=first.id)
        await runner.memory_service.add_session_to_memory(session)
        await runner.memory_service.add_session_to_memory(session)  # again, as ADK apps do after each turn
        later = await runner.session_service.create_session(app_name=APP, user_id="ada")
        answer = await turn(runner, "ada", later.id, "Which seats do I prefer on flights?")
        other = await runner.session_service.create_session(app_name=APP, user_id="bob")
        bobs = await turn(runner, "bob", other.id, "Which seats do I prefer on flights?")
        return answer, bobs, first.id

    answer, bobs, session_id = asyncio.run(conversation())
    assert model.calls == ["note", "note", "load_memory", "answer", "load_memory", "answer"]
    day = store.now().strftime("%Y-%m-%d")
    assert answer.startswith(f"From memory: I prefer window seats on long flights. ({day})")
    assert bobs == "I don't know yet."  # another user's memories are not searched
    memories = {m.content: m for m in store.list()}
    assert set(memories) == {"I prefer window seats on long flights.", "My name is Ada Byron.",
                             "The company pays for lounge access."}
    assert [memories[text].category for text in sorted(memories)] == ["preferences", "profile", "general"]
    seat = memories["I prefer window seats on long flights."]
    assert set(seat.tags) == {"adk", "adk-app-travel", "adk-user-ada"} and seat.source == f"adk session {session_id}"
    log = git(store.root, "log", "--format=%an|%s").splitlines()
    assert log[0] == "planner|ADK: remember 3 for user ada of travel"
    assert git(store.root, "log", "-1", "--format=%B").strip().endswith(
        f"ADK-App: travel\nADK-User: ada\nADK-Session: {session_id}")
    assert len(log) == 2  # the second add of the same session wrote nothing


def test_search_memory_is_recall_with_dates_and_delete_forgets(store: MemoryStore, clock: Any) -> None:
    service = MemsiteMemoryService(store)

    async def run() -> tuple[Any, Any, Any]:
        await service.add_memory(app_name=APP, user_id="user@example.com", memories=[
            MemoryEntry(content=types.Content(parts=[types.Part(text="Passport expires in March 2027")]))])
        clock.advance(days=40)
        await service.add_memory(app_name=APP, user_id="user@example.com", memories=[
            MemoryEntry(content=types.Content(parts=[types.Part(text="Passport renewal booked for February")]))])
        found = await service.search_memory(app_name=APP, user_id="user@example.com", query="passport")
        elsewhere = await service.search_memory(app_name="other-app", user_id="user@example.com", query="passport")
        await service.delete_memory(app_name=APP, user_id="user@example.com", memory_id=found.memories[0].id)
        with pytest.raises(Exception, match="no memory"):
            await service.delete_memory(app_name="other-app", user_id="user@example.com",
                                        memory_id=found.memories[1].id)
        after = await service.search_memory(app_name=APP, user_id="user@example.com", query="passport")
        return found, elsewhere, after

    found, elsewhere, after = asyncio.run(run())
    texts = [entry.content.parts[0].text for entry in found.memories]
    assert texts == ["Passport renewal booked for February", "Passport expires in March 2027"]  # newer first
    assert [entry.timestamp for entry in found.memories] == ["2026-12-11T09:00:00Z", "2026-11-01T09:00:00Z"]
    assert found.memories[0].custom_metadata["category"] == "general"
    assert elsewhere.memories == []
    assert [entry.content.parts[0].text for entry in after.memories] == ["Passport expires in March 2027"]
    user_tag = next(t for t in store.list()[0].tags if t.startswith("adk-user-"))
    assert len(user_tag) == len("adk-user-") + 16  # (an e-mail is no valid tag: its hash is)


def test_with_a_language_model_configured_the_session_goes_through_memsites_extractor(
        store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    server = Endpoint(chat(json.dumps([{"content": "Ada flies to Lisbon on 3 December", "category": "events",
                                        "tags": ["trip", "not a tag!"]}])))
    server.start()
    try:
        monkeypatch.setenv("MEMSITE_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("MEMSITE_LLM_MODEL", "extractor")
        service = MemsiteMemoryService(store)
        assert isinstance(service.extractor, Extractor)
        runner, _ = make_runner(store)
        runner.memory_service = service

        async def run() -> None:
            session = await runner.session_service.create_session(app_name=APP, user_id="ada")
            await turn(runner, "ada", session.id, "Book me on the 3 December flight to Lisbon.")
            session = await runner.session_service.get_session(app_name=APP, user_id="ada", session_id=session.id)
            await service.add_session_to_memory(session)

        asyncio.run(run())
    finally:
        server.stop()
    prompt = server.requests[0]["json"]["messages"][-1]["content"]
    assert "Book me on the 3 December flight to Lisbon." in prompt and "Noted." in prompt
    [memory] = store.list()
    assert (memory.content, memory.category) == ("Ada flies to Lisbon on 3 December", "events")
    assert set(memory.tags) == {"trip", "adk", "adk-app-travel", "adk-user-ada"}


@pytest.mark.parametrize(("said", "facts"), [
    ("I prefer aisle seats. What time is it?", [("I prefer aisle seats.", "preferences")]),
    ("my name is Grace Hopper and I work at the Navy", [("My name is Grace Hopper and I work at the Navy",
                                                         "profile")]),
    ("Remember that the gate code is on the fridge!", [("The gate code is on the fridge!", "general")]),
    ("Note: our office moved to Porto.\nWe're all vegetarians.", [("Our office moved to Porto.", "general"),
                                                             ("We're all vegetarians.", "general")]),
    ("I think so. I wonder why. I want you to book it. Hello there. Do I like tea?", []),
    ("I do.", []),
])
def test_facts_a_user_states_are_found_without_a_model(said: str, facts: list[tuple[str, str]]) -> None:
    assert stated_facts(said) == facts


def test_two_users_stating_the_same_fact_each_keep_it(store: MemoryStore) -> None:
    service = MemsiteMemoryService(store)
    said = [MemoryEntry(content=types.Content(parts=[types.Part(text="I prefer aisle seats.")]))]

    async def run() -> tuple[Any, Any]:
        for user in ("ada", "bob", "ada"):
            await service.add_memory(app_name=APP, user_id=user, memories=said)
        return (await service.search_memory(app_name=APP, user_id="ada", query="aisle seats"),
                await service.search_memory(app_name=APP, user_id="bob", query="aisle seats"))

    ada, bob = asyncio.run(run())
    assert len(ada.memories) == len(bob.memories) == 1 and ada.memories[0].id != bob.memories[0].id
    assert len(store.list()) == 2  # ada's second time added nothing


def test_an_empty_or_question_only_session_writes_nothing(store: MemoryStore, tmp_path: Path) -> None:
    before = git(store.root, "rev-parse", "HEAD")
    service = MemsiteMemoryService(store)
    runner, _ = make_runner(store)

    async def run() -> None:
        session = await runner.session_service.create_session(app_name=APP, user_id="ada")
        await service.add_session_to_memory(session)
        await turn(runner, "ada", session.id, "Where do I sit?")
        session = await runner.session_service.get_session(app_name=APP, user_id="ada", session_id=session.id)
        await service.add_session_to_memory(session)

    asyncio.run(run())
    assert git(store.root, "rev-parse", "HEAD") == before
