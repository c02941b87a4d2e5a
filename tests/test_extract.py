"""Extraction: the prompt a model is sent and what is kept from its answer."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from memsite.features.extract import Candidate, Extractor, parse_answer
from memsite.foundation.config import Category, Config
from memsite.foundation.errors import InvalidInput, LLMError

from .test_llm import Endpoint, chat

CONVERSATION = [
    {"role": "system", "content": "You are a helpful coding assistant."},
    {"role": "user", "content": "Our CI runs on GitHub Actions; I always want ruff before pytest."},
    {"role": "assistant", "content": "Noted: ruff first, then pytest."},
]
ENTRIES = [
    {"content": "The user wants ruff to run before pytest in CI.", "category": "preferences",
     "abstract": "ruff before pytest", "overview": "In CI, lint first. Then test.", "tags": ["ci", "ruff"]},
    {"content": "The project's CI runs on GitHub Actions.", "category": "entities", "tags": "ci, github-actions"},
]


class Scripted:
    """An LLM that answers from a script (or raises) and keeps every prompt it was sent."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer if isinstance(self.answer, str) else json.dumps(self.answer)


def contents(candidates: list[Candidate]) -> list[str]:
    return [c.content for c in candidates]


def test_a_json_answer_becomes_candidates_with_every_field() -> None:
    llm = Scripted(ENTRIES)
    assert Extractor(llm).extract(CONVERSATION) == [
        Candidate("The user wants ruff to run before pytest in CI.", "preferences", "ruff before pytest",
                  "In CI, lint first. Then test.", ("ci", "ruff")),
        Candidate("The project's CI runs on GitHub Actions.", "entities", tags=("ci", "github-actions")),
    ]
    assert len(llm.prompts) == 1


@pytest.mark.parametrize("answer", [
    "```json\n" + json.dumps(ENTRIES, indent=2) + "\n```",
    "Here is what I found [2 entries]:\n" + json.dumps(ENTRIES) + "\nLet me know if you need more.",
    json.dumps({"memories": ENTRIES}),
    "Sure! " + json.dumps({"items": ENTRIES}),
])
def test_json_is_found_in_fences_prose_and_wrapping_objects(answer: str) -> None:
    assert contents(parse_answer(answer)) == [e["content"] for e in ENTRIES]


def test_a_lone_entry_object_is_one_memory() -> None:
    assert contents(parse_answer("Found one: " + json.dumps(ENTRIES[1]))) == [ENTRIES[1]["content"]]


def test_an_answer_cut_off_mid_array_keeps_its_complete_entries() -> None:
    answer = json.dumps([*ENTRIES, {"content": "A third memory"}])
    cut = answer[: answer.index("A third") + 5]
    assert contents(parse_answer(cut)) == [e["content"] for e in ENTRIES]


@pytest.mark.parametrize("answer", ["I could not find anything worth remembering.", "[]", "{not json at all"])
def test_an_answer_without_memories_gives_none(answer: str) -> None:
    assert parse_answer(answer) == []


def test_an_answer_that_is_not_json_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    assert Extractor(Scripted("Sorry, I cannot help with that.")).extract(CONVERSATION) == []
    assert "no JSON list of memories" in caplog.text and "Sorry, I cannot" in caplog.text


def test_bad_entries_are_dropped_with_their_reason_and_the_rest_kept(caplog: pytest.LogCaptureFixture) -> None:
    answer = [ENTRIES[0], {"category": "general"}, {"content": 42}, {"content": "  "}, "a string",
              {"content": ENTRIES[0]["content"], "category": "general"}, ENTRIES[1]]
    with caplog.at_level(logging.INFO, logger="memsite.extract"):
        kept = parse_answer(json.dumps(answer))
    assert contents(kept) == [e["content"] for e in ENTRIES]
    assert "entry 2 dropped: 'content' missing" in caplog.text
    assert "entry 3 dropped: 'content' is int, not text" in caplog.text
    assert "entry 4 dropped: 'content' is empty" in caplog.text
    assert "entry 5 dropped: expected an object, got str" in caplog.text
    assert "entry 6 dropped: same content as entry 1" in caplog.text


def test_optional_fields_of_the_wrong_type_are_ignored_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    entry = {"content": "Deploys happen on Fridays.", "category": "events", "abstract": ["a", "list"],
             "overview": "  ", "tags": ["deploy", 7, "release day", "no/slash", "deploy"]}
    with caplog.at_level(logging.INFO, logger="memsite.extract"):
        (candidate,) = parse_answer(json.dumps([entry]))
    assert candidate == Candidate("Deploys happen on Fridays.", "events", None, None, ("deploy", "release-day"))
    assert "entry 1: 'abstract' ignored, it is list" in caplog.text
    assert "tag 7 dropped" in caplog.text and "tag 'no/slash' dropped" in caplog.text


def test_an_alias_is_routed_and_an_unknown_category_filed_under_general(caplog: pytest.LogCaptureFixture) -> None:
    answer = [{"content": "Release: tag, build, then publish.", "category": "Workflow"},
              {"content": "The staging cluster is called kestrel.", "category": "infrastructure"},
              {"content": "The user's timezone is CET."}]
    with caplog.at_level(logging.INFO, logger="memsite.extract"):
        kept = parse_answer(json.dumps(answer))
    assert [c.category for c in kept] == ["patterns", "general", "general"]
    assert "entry 2 category 'infrastructure' is unknown; filed under general" in caplog.text
    assert "entry 3 has no category" in caplog.text


def test_a_configured_fallback_wins_and_without_general_an_unknown_category_is_dropped(
        caplog: pytest.LogCaptureFixture) -> None:
    categories = (Category("facts", "Facts."), Category("inbox", "Unsorted."))
    answer = json.dumps([{"content": "Something odd.", "category": "weird"}])
    assert [c.category for c in parse_answer(answer, config=Config(categories=categories,
                                                                   fallback_category="inbox"))] == ["inbox"]
    assert parse_answer(answer, config=Config(categories=categories)) == []
    assert "entry 1 dropped: category 'weird' is unknown and there is no 'general' category" in caplog.text


@pytest.mark.parametrize("failure", [LLMError("http://x/chat/completions: HTTP 500"), TimeoutError("slow"),
                                     RuntimeError("boom")])
def test_a_failing_model_gives_no_candidates_and_is_logged(caplog: pytest.LogCaptureFixture,
                                                           failure: Exception) -> None:
    llm = Scripted(failure)
    assert Extractor(llm).extract(CONVERSATION) == []
    assert len(llm.prompts) == 1
    assert f"the language model failed ({type(failure).__name__}: {failure})" in caplog.text


@pytest.mark.parametrize("messages", [
    [],
    [{"role": "system", "content": "You are helpful."}],
    [{"role": "user", "content": "   "}, {"role": "assistant", "content": None},
     {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:..."}}]}],
])
def test_a_conversation_with_nothing_said_never_reaches_the_model(messages: list[dict[str, Any]]) -> None:
    llm = Scripted(ENTRIES)
    assert Extractor(llm).extract(messages) == []
    assert llm.prompts == []


def test_the_prompt_lists_the_categories_and_the_conversation_without_the_system_message() -> None:
    config = Config(categories=(Category("recipes", "Dishes the user cooks."), Category("general", "Anything.")))
    messages = [*CONVERSATION, {"role": "user", "content": [{"type": "text", "text": "Also: use uv."},
                                                            {"type": "image_url", "image_url": {"url": "x"}}]}]
    prompt = Extractor(Scripted([]), config=config).build_prompt(messages)
    assert "- recipes: Dishes the user cooks.\n- general: Anything." in prompt
    assert "- preferences:" not in prompt
    assert prompt.endswith("user: Our CI runs on GitHub Actions; I always want ruff before pytest.\n"
                           "assistant: Noted: ruff first, then pytest.\nuser: Also: use uv.\n")
    assert "helpful coding assistant" not in prompt
    assert "omitted" not in prompt
    assert "[]" in prompt and "secrets" in prompt


def test_a_long_conversation_keeps_the_newest_messages_within_the_budget() -> None:
    messages = [{"role": "user" if i % 2 else "assistant", "content": f"message {i} " + "x" * 90} for i in range(50)]
    llm = Scripted([])
    Extractor(llm, max_chars=1000).extract(messages)
    (prompt,) = llm.prompts
    conversation = prompt.split("only the most recent part is shown.)\n", 1)[1]
    assert len(conversation.rstrip("\n")) <= 1000
    assert "message 49 " in conversation and "message 41 " in conversation
    assert "message 40 " not in conversation and "message 0 " not in prompt


def test_a_single_message_over_the_budget_keeps_its_end() -> None:
    llm = Scripted([])
    Extractor(llm, max_chars=200).extract([{"role": "user", "content": "START " + "y" * 500 + " THE END"}])
    (prompt,) = llm.prompts
    assert "omitted" in prompt and "START" not in prompt
    assert prompt.endswith("y THE END\n") and "user: …y" in prompt


@pytest.mark.parametrize("messages, error", [
    ("hello", "messages: expected a list"),
    ([{"role": "user", "content": "hi"}, "hi again"], "message 2: expected a mapping"),
    ([{"content": "no role"}], "message 1: 'role' must be text"),
    ([{"role": "user", "content": 42}], "message 1: 'content' must be text or a list of parts"),
])
def test_malformed_messages_are_refused_by_number(messages: Any, error: str) -> None:
    llm = Scripted(ENTRIES)
    with pytest.raises(InvalidInput, match=error):
        Extractor(llm).extract(messages)
    assert llm.prompts == []


def test_a_candidate_round_trips_through_json() -> None:
    candidate = Candidate("Uses uv, not pip.", "preferences", "uv over pip", "The user installs with uv.",
                          ("uv", "python"))
    data = json.loads(json.dumps(candidate.to_dict()))
    assert data["tags"] == ["uv", "python"]
    assert Candidate.from_dict(data) == candidate
    assert Candidate.from_dict({"content": "x", "category": "general"}) == Candidate("x", "general")


@pytest.mark.parametrize("data, error", [
    (["content"], "candidate: expected a mapping, got list"),
    ({"content": "x"}, "candidate field 'category': expected non-empty text, got None"),
    ({"content": "x", "category": "general", "tags": "a,b"}, "candidate field 'tags': expected a list"),
    ({"content": "x", "category": "general", "abstract": 3}, "candidate field 'abstract': expected text or null"),
    ({"content": "x", "category": "general", "score": 1}, "candidate: unknown field"),
])
def test_a_bad_candidate_record_is_refused_naming_the_field(data: Any, error: str) -> None:
    with pytest.raises(InvalidInput, match=error):
        Candidate.from_dict(data)


def test_extraction_end_to_end_through_an_http_model() -> None:
    answer = "Here you go:\n```json\n" + json.dumps({"memories": ENTRIES}) + "\n```"
    server = Endpoint(chat(answer))
    server.start()
    try:
        kept = Extractor(server.client(api_key="sk-local")).extract(CONVERSATION)
    finally:
        server.stop()
    assert contents(kept) == [e["content"] for e in ENTRIES]
    (request,) = server.requests
    prompt = request["json"]["messages"][-1]["content"]
    assert "user: Our CI runs on GitHub Actions" in prompt and "- patterns:" in prompt
