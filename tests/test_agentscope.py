"""memsite as AgentScope 2.x middleware, driven by a real Agent and a scripted chat model.

Only the model's answers are scripted: the Agent, its toolkit, permission engine
and tool-input validation are AgentScope's own; the memory is a git repository.
AgentScope 1.x is tested in test_agentscope1.py.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memsite import Extractor, MemoryStore

from .conftest import Clock, git

pytest.importorskip("agentscope")
if pytest.importorskip("memsite.integrations.agentscope").MAJOR != 2:
    pytest.skip("AgentScope 2.x is not installed (test_agentscope1.py tests 1.x)", allow_module_level=True)
from agentscope.agent import Agent
from agentscope.credential import CredentialBase
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import TextBlock, ToolCallBlock, UserMsg
from agentscope.model import ChatModelBase, ChatResponse
from agentscope.tool import Toolkit

from memsite.integrations.agentscope import MemsiteMiddleware

FACT = "The staging cluster is called vega"
CALLS = itertools.count()
Step = Callable[[str], ChatResponse]


def say(text: str) -> Step:
    return lambda prompt: ChatResponse(content=[TextBlock(text=text)], is_last=True)


def use(tool: str, **arguments: Any) -> Step:
    call = f"call-{next(CALLS)}"
    return lambda prompt: ChatResponse(content=[ToolCallBlock(id=call, name=tool, input=json.dumps(arguments))],
                                       is_last=True)


def answer_from_prompt(prompt: str) -> ChatResponse:
    """What a model answers: the cluster's name if the prompt holds it, else that it does not know."""
    return say("It is vega." if "vega" in prompt else "I do not know.")(prompt)


class ScriptedModel(ChatModelBase):
    """A chat model that plays its steps in order and keeps every prompt (as an OpenAI API would get it)
    and the tools it was offered."""

    def __init__(self, *steps: Step) -> None:
        super().__init__(CredentialBase(), "scripted", ChatModelBase.Parameters(), stream=False, max_retries=0)
        self.formatter = OpenAIChatFormatter()
        self.steps = list(steps)
        self.prompts: list[str] = []
        self.tools: list[str] = []

    async def _call_api(self, model_name: str, messages: list[Any], tools: list[dict[str, Any]] | None = None,
                        tool_choice: Any = None, **kwargs: Any) -> ChatResponse:
        self.prompts.append(json.dumps(await self.formatter.format(messages), ensure_ascii=False))
        self.tools = [t["function"]["name"] for t in tools or []]
        return self.steps.pop(0)(self.prompts[-1])


def session(repo: Path, clock: Clock, mode: str, model: ScriptedModel, said: str, **options: Any) -> str:
    """One agent session: a fresh store, middleware and agent; the user says one thing; the agent's reply."""
    async def run() -> str:
        with MemoryStore(repo, agent="friday", clock=clock) as store:
            memory = MemsiteMiddleware(store, mode, **options)
            agent = Agent(name="Friday", system_prompt="You are a helpful assistant.", model=model,
                          toolkit=Toolkit(tools=await memory.list_tools()), middlewares=[memory])
            reply = await agent.reply(UserMsg(name="user", content=said))
            return reply.get_text_content() or ""

    reply = asyncio.run(run())
    assert model.steps == [], "the agent did not play the whole script"
    return reply


def commits_by_friday(repo: Path) -> str:
    return git(repo, "log", "--author=friday", "--format=%s%n%b")


def contents(repo: Path) -> list[str]:
    with MemoryStore(repo, agent="reader") as reader:
        return sorted(m.content for m in reader.list())


def test_static_control_records_after_a_reply_and_recalls_before_the_next(store: MemoryStore, clock: Clock) -> None:
    first = ScriptedModel(say("Noted."))
    session(store.root, clock, "static_control", first, f"Remember this: {FACT}.", category="entities")
    assert not {"record_to_memory", "retrieve_from_memory"} & set(first.tools)  # static control: no memory tools
    assert "Long-term memory" not in first.prompts[0]
    with MemoryStore(store.root, agent="reader") as reader:
        remembered = {m.content: m for m in reader.list()}
    assert set(remembered) == {f"Remember this: {FACT}.", "Noted."}
    assert {m.category for m in remembered.values()} == {"entities"}
    assert {m.agent for m in remembered.values()} == {"friday"}
    assert commits_by_friday(store.root).startswith("Record 2 messages from friday")

    second = ScriptedModel(answer_from_prompt)  # a new session: a new process would see the same
    assert session(store.root, clock, "static_control", second, "What is the staging cluster called?") == "It is vega."
    assert "<long_term_memory>" in second.prompts[0] and "staging cluster is called vega" in second.prompts[0]

    third = ScriptedModel(answer_from_prompt)  # a question nothing in memory is about: nothing is added to the prompt
    session(store.root, clock, "static_control", third, "Qwertyuiop?")
    assert "<long_term_memory>" not in third.prompts[0]


def test_agent_control_gives_the_model_tools_that_need_no_permission_step(store: MemoryStore, clock: Clock) -> None:
    first = ScriptedModel(use("record_to_memory", thinking="the user named a cluster", content=[FACT]), say("Saved."))
    assert session(store.root, clock, "agent_control", first, f"Please remember: {FACT}.") == "Saved."
    assert {"record_to_memory", "retrieve_from_memory"} <= set(first.tools)
    assert "retrieve_from_memory" in first.prompts[0]  # the system prompt tells the model about its memory
    assert "Recorded 1 item(s): 1 new" in first.prompts[1]  # the tool ran (no confirmation asked): its answer
    assert commits_by_friday(store.root).startswith("Record to memory: the user named a cluster")
    assert contents(store.root) == [FACT]  # agent control: the conversation itself is not recorded

    second = ScriptedModel(use("retrieve_from_memory", keywords=["staging cluster"]), answer_from_prompt)
    assert session(store.root, clock, "agent_control", second, "Which cluster is staging?") == "It is vega."
    assert "vega" not in second.prompts[0] and "vega" in second.prompts[1]  # nothing recalled unasked


def test_record_to_memory_supersedes_a_memory_the_model_names(store: MemoryStore, clock: Clock) -> None:
    old = store.remember("The staging cluster is called rigel.", category="general")
    model = ScriptedModel(use("record_to_memory", thinking="the cluster was renamed", content=[FACT],
                              supersedes=old.id), say("Noted."))
    assert session(store.root, clock, "agent_control", model, "Staging moved to vega.") == "Noted."
    assert f"It supersedes {old.id}" in model.prompts[1]
    assert store.get(old.id).superseded_by is not None
    assert [h.memory.content for h in store.recall("staging cluster")] == [FACT]


def test_both_modes_at_once_with_an_extractor(store: MemoryStore, clock: Clock) -> None:
    def llm(prompt: str) -> str:  # the extractor's LLM: turns the exchange into one clean memory
        assert "vega" in prompt
        return json.dumps([{"content": FACT, "category": "entities", "tags": ["staging"]}])

    first = ScriptedModel(use("record_to_memory", thinking="a name worth keeping", content=["Staging runs on vega"]),
                          say("Got it."))
    session(store.root, clock, "both", first, f"Note that {FACT.lower()}.", extractor=Extractor(llm=llm))
    assert contents(store.root) == sorted([FACT, "Staging runs on vega"])  # the tool's item and the extracted one
    assert "Ingest-Batch" in commits_by_friday(store.root)

    second = ScriptedModel(answer_from_prompt)
    assert session(store.root, clock, "both", second, "What do we call the staging cluster?") == "It is vega."
    assert "<long_term_memory>" in second.prompts[0]


@pytest.mark.parametrize("tool, arguments, refusal", [
    ("record_to_memory", {"thinking": "keys"}, "'content' is a required property"),
    ("record_to_memory", {"thinking": "x", "content": ["A fact"], "importance": "high"},
     "Additional properties are not allowed ('importance' was unexpected)"),
    ("retrieve_from_memory", {"query": "cluster"}, "'keywords' is a required property"),
])
def test_a_call_with_missing_or_extra_arguments_is_an_error_the_model_reads_and_the_agent_goes_on(
        store: MemoryStore, clock: Clock, tool: str, arguments: dict[str, Any], refusal: str) -> None:
    before = git(store.root, "rev-parse", "HEAD").strip()
    model = ScriptedModel(use(tool, **arguments),
                          use("record_to_memory", thinking="retry", content=[FACT]), say("Saved on the second try."))
    assert session(store.root, clock, "agent_control", model, f"Remember: {FACT}") == "Saved on the second try."
    assert f"Input validation failed for tool '{tool}': {refusal}" in model.prompts[1]
    assert git(store.root, "rev-list", "--count", f"{before}..HEAD").strip() == "1"  # only the good call wrote
    assert contents(store.root) == [FACT]


def test_a_refused_write_is_an_error_the_model_reads_and_nothing_is_written(store: MemoryStore, clock: Clock) -> None:
    before = git(store.root, "rev-parse", "HEAD")
    model = ScriptedModel(use("record_to_memory", thinking="keys", content=["key AKIAQWERTYUIOPASDF23"]), say("Oops."))
    assert session(store.root, clock, "agent_control", model, "Remember the deploy key.") == "Oops."
    assert "Error: " in model.prompts[1] and "aws-access-key-id" in model.prompts[1]
    assert git(store.root, "rev-parse", "HEAD") == before
    told = ScriptedModel(say("I will not repeat it."))  # static control: the exchange holds a credential
    assert session(store.root, clock, "static_control", told, "My key is AKIAQWERTYUIOPASDF23") == \
        "I will not repeat it."
    assert git(store.root, "rev-parse", "HEAD") == before
    with pytest.raises(Exception, match="category 'nope' is unknown"):
        MemsiteMiddleware(store, category="nope")
    with pytest.raises(ValueError, match="mode: expected one of static_control, agent_control, both, got 'always'"):
        MemsiteMiddleware(store, mode="always")


def test_asking_for_the_1x_class_names_the_installed_version() -> None:
    from importlib import metadata

    with pytest.raises(ImportError, match=f"agentscope {metadata.version('agentscope')} is installed: "
                                          "use MemsiteMiddleware"):
        from memsite.integrations.agentscope import MemsiteLongTermMemory  # noqa: F401
