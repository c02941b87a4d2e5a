"""memsite's MCP server in the OpenAI Agents SDK: an Agent with `memsite mcp` over stdio and a scripted Model.

The SDK starts the server as a subprocess (``MCPServerStdio``), lists its tools
for the model and runs the calls the model makes; the model follows a script,
so no network is used.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Runner, set_tracing_disabled
from agents.items import ModelResponse
from agents.mcp import MCPServerStdio
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from memsite import MemoryStore

from .conftest import ROOT, git

set_tracing_disabled(True)


class ScriptedModel(Model):
    """Remembers what follows "Remember:", recalls for a question, then says what the tool answered."""

    def __init__(self) -> None:
        self.offered: list[set[str]] = []
        self.calls = 0

    async def get_response(self, system_instructions: Any, input: Any, model_settings: Any, tools: Any,
                           output_schema: Any, handoffs: Any, tracing: Any, **_: Any) -> ModelResponse:
        self.offered.append({tool.name for tool in tools})
        last = input[-1] if isinstance(input, list) else {"role": "user", "content": input}
        if last.get("type") == "function_call_output":
            output = last["output"]  # the tool's text, or a list of content items holding it
            said = output if isinstance(output, str) else "".join(item["text"] for item in output)
            return _response(_message(f"The memory tool said: {said}"))
        text = last["content"] if isinstance(last["content"], str) else last["content"][0]["text"]
        self.calls += 1
        if text.startswith("Remember: "):
            return _response(_call(self.calls, "remember", content=text.removeprefix("Remember: "),
                                   category="preferences"))
        return _response(_call(self.calls, "recall", query=text, limit=3))

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the test runs without streaming")


def _response(item: Any) -> ModelResponse:
    return ModelResponse(output=[item], usage=Usage(), response_id=None)


def _call(n: int, name: str, **arguments: Any) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", call_id=f"call_{n}", name=name,
                                    arguments=json.dumps(arguments), id=f"fc_{n}", status="completed")


def _message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text, annotations=[])])


def memsite_server(repo: Any) -> MCPServerStdio:
    return MCPServerStdio(params={"command": sys.executable,
                                  "args": ["-m", "memsite", "mcp", "--repo", str(repo), "--agent", "openai-agent"],
                                  "env": {**os.environ, "PYTHONPATH": str(ROOT)}},
                          name="memsite", client_session_timeout_seconds=60)


def test_an_openai_agent_remembers_and_recalls_through_memsites_mcp_server(store: MemoryStore) -> None:
    model = ScriptedModel()

    async def run(said: str) -> str:
        async with memsite_server(store.root) as server:  # a new server process each conversation
            agent = Agent(name="assistant", instructions="Use your memory.", model=model, mcp_servers=[server])
            result = await Runner.run(agent, said)
            return str(result.final_output)

    told = asyncio.run(run("Remember: The user wants release notes in British English"))
    made = json.loads(told.removeprefix("The memory tool said: "))
    assert made["action"] == "created" and made["category"] == "preferences"
    assert git(store.root, "log", "-1", "--format=%H %an").split() == [made["commit"], "openai-agent"]

    answer = asyncio.run(run("Which English do I want release notes in?"))
    results = json.loads(answer.removeprefix("The memory tool said: "))["results"]
    assert results[0]["id"] == made["id"]
    assert results[0]["abstract"] == "The user wants release notes in British English"
    assert {"remember", "recall", "read", "forget", "core"} <= model.offered[0]  # memsite's tools reached the model
    assert [m.content for m in store.list()] == ["The user wants release notes in British English"]


def test_a_refused_write_reaches_the_model_as_a_tool_error_and_writes_nothing(store: MemoryStore) -> None:
    model = ScriptedModel()
    before = git(store.root, "rev-parse", "HEAD")

    async def run() -> str:
        async with memsite_server(store.root) as server:
            agent = Agent(name="assistant", instructions="Use your memory.", model=model, mcp_servers=[server])
            result = await Runner.run(agent, "Remember: the deploy key is AKIAQWERTYUIOPASDF23")
            return str(result.final_output)

    told = asyncio.run(run())
    assert "looks like an AWS access key id" in told and "nothing was written" in told
    assert git(store.root, "rev-parse", "HEAD") == before
