"""memsite as AgentScope 1.x's long-term memory, driven by a real ReActAgent and a scripted chat model.

AgentScope 2.x (what the test extra installs on Python 3.11+) is tested in
test_agentscope.py; this file runs where AgentScope 1.x is installed (the
second environment of .ci/run).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memsite import Extractor, MemoryStore

from .conftest import Clock, git

pytest.importorskip("agentscope")
if pytest.importorskip("memsite.integrations.agentscope").MAJOR != 1:
    pytest.skip("AgentScope 1.x is not installed (test_agentscope.py tests 2.x)", allow_module_level=True)
from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock, ToolUseBlock
from agentscope.model import ChatModelBase, ChatResponse

from memsite.integrations.agentscope import MemsiteLongTermMemory

FACT = "The staging cluster is called vega"
Step = Callable[[str], ChatResponse]


def say(text: str) -> Step:
    return lambda prompt: ChatResponse(content=[TextBlock(type="text", text=text)])


def use(tool: str, **arguments: Any) -> Step:
    return lambda prompt: ChatResponse(content=[ToolUseBlock(type="tool_use", id=f"call-{tool}", name=tool,
                                                             input=arguments)])


def answer_from_prompt(prompt: str) -> ChatResponse:
    """What a model answers: the cluster's name if the prompt holds it, else that it does not know."""
    return say("It is vega." if "vega" in prompt else "I do not know.")(prompt)


class ScriptedModel(ChatModelBase):
    """A chat model that plays its steps in order and keeps every prompt and the tools it was offered."""

    def __init__(self, *steps: Step) -> None:
        super().__init__("scripted", stream=False)
        self.steps = list(steps)
        self.prompts: list[str] = []
        self.tools: list[str] = []

    async def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                       tool_choice: str | None = None, **kwargs: Any) -> ChatResponse:
        prompt = json.dumps(messages, ensure_ascii=False)
        self.prompts.append(prompt)
        self.tools = [t["function"]["name"] for t in tools or []]
        return self.steps.pop(0)(prompt)


def session(repo: Path, clock: Clock, mode: str, model: ScriptedModel, said: str, **options: Any) -> str:
    """One agent session: a fresh store, memory and agent; the user says one thing; the agent's reply."""
    async def run() -> str:
        with MemoryStore(repo, agent="friday", clock=clock) as store:
            agent = ReActAgent(name="Friday", sys_prompt="You are a helpful assistant.", model=model,
                               formatter=OpenAIChatFormatter(), long_term_memory_mode=mode,
                               long_term_memory=MemsiteLongTermMemory(store, **options))
            agent.set_console_output_enabled(False)
            reply = await agent(Msg("user", said, "user"))
            return reply.get_text_content() or ""

    reply = asyncio.run(run())
    assert model.steps == [], "the agent did not play the whole script"
    return reply


def commits_by_friday(repo: Path) -> str:
    return git(repo, "log", "--author=friday", "--format=%s%n%b")


def test_static_control_records_after_a_reply_and_retrieves_before_the_next(store: MemoryStore, clock: Clock) -> None:
    first = ScriptedModel(say("Noted."))
    session(store.root, clock, "static_control", first, f"Remember this: {FACT}.", category="entities")
    assert "record_to_memory" not in first.tools  # static control: the model gets no memory tools
    with MemoryStore(store.root, agent="planner") as reader:
        remembered = {m.content: m for m in reader.list()}
    assert remembered[f"Remember this: {FACT}."].category == "entities"
    assert "Noted." in remembered and "Record 2 messages from friday" in commits_by_friday(store.root)

    second = ScriptedModel(answer_from_prompt)
    reply = session(store.root, clock, "static_control", second, "What is the staging cluster called?")
    assert reply == "It is vega."
    assert "<long_term_memory>" in second.prompts[0]


def test_agent_control_gives_the_model_the_tools(store: MemoryStore, clock: Clock) -> None:
    first = ScriptedModel(use("record_to_memory", thinking="the user named a cluster", content=[FACT]), say("Saved."))
    assert session(store.root, clock, "agent_control", first, f"Please remember: {FACT}.") == "Saved."
    assert {"record_to_memory", "retrieve_from_memory"} <= set(first.tools)
    assert "Recorded 1 item(s): 1 new" in first.prompts[1]  # the tool's answer, as the model saw it
    assert "Record to memory: the user named a cluster" in commits_by_friday(store.root)
    with MemoryStore(store.root, agent="planner") as reader:
        assert [m.content for m in reader.list()] == [FACT]  # the conversation itself was not recorded

    second = ScriptedModel(use("retrieve_from_memory", keywords=["staging cluster"]), answer_from_prompt)
    assert session(store.root, clock, "agent_control", second, "Which cluster is staging?") == "It is vega."
    assert "<long_term_memory>" not in second.prompts[0]  # agent control: nothing retrieved unasked
    assert "vega" not in second.prompts[0] and "vega" in second.prompts[1]


def test_both_modes_at_once_with_an_extractor(store: MemoryStore, clock: Clock) -> None:
    def llm(prompt: str) -> str:  # the extractor's LLM: turns the conversation into one clean memory
        assert "vega" in prompt
        return json.dumps([{"content": FACT, "category": "entities", "tags": ["staging"]}])

    first = ScriptedModel(use("record_to_memory", thinking="a name worth keeping", content=["Staging runs on vega"]),
                          say("Got it."))
    session(store.root, clock, "both", first, f"Note that {FACT.lower()}.", extractor=Extractor(llm=llm))
    with MemoryStore(store.root, agent="planner") as reader:
        contents = sorted(m.content for m in reader.list())
    assert contents == sorted([FACT, "Staging runs on vega"])  # the tool's item and the extracted one
    assert "Ingest-Batch" in commits_by_friday(store.root)

    second = ScriptedModel(answer_from_prompt)
    assert session(store.root, clock, "both", second, "What do we call the staging cluster?") == "It is vega."
    assert "<long_term_memory>" in second.prompts[0]


def test_tool_errors_reach_the_model_and_nothing_is_written(store: MemoryStore, clock: Clock) -> None:
    before = git(store.root, "rev-parse", "HEAD")
    model = ScriptedModel(use("record_to_memory", thinking="keys", content=["key AKIAQWERTYUIOPASDF23"]), say("Oops."))
    session(store.root, clock, "agent_control", model, "Remember the deploy key.")
    assert "Error: " in model.prompts[1] and "aws-access-key-id" in model.prompts[1]
    assert git(store.root, "rev-parse", "HEAD") == before
    with pytest.raises(Exception, match="category 'nope' is unknown"):
        MemsiteLongTermMemory(store, category="nope")
