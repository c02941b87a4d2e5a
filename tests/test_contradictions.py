"""Noticed contradictions: remember judges them with a language model (a real local server here), else flags them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsite import MemoryStore
from memsite.cli import main

from .conftest import assert_clean, git
from .test_llm import Endpoint, chat

BERLIN = "The user lives in Berlin."
PARIS = "The user lives in Paris."


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    server = Endpoint(chat("[]"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def judged(store: MemoryStore, endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryStore]:
    """The store reopened with MEMSITE_LLM_* pointing at the local server."""
    monkeypatch.setenv("MEMSITE_LLM_BASE_URL", endpoint.base_url)
    monkeypatch.setenv("MEMSITE_LLM_MODEL", "test-model")
    monkeypatch.setenv("MEMSITE_LLM_TIMEOUT", "1")
    with MemoryStore(store.root, agent="planner", clock=store._store._clock) as opened:
        yield opened


def verdict(action: str, target: str | None, why: str = "the user moved") -> tuple[int, dict[str, str], bytes]:
    return chat(f"Here is my answer:\n```json\n{json.dumps({'action': action, 'id': target, 'why': why})}\n```")


def texts(store: MemoryStore) -> list[str]:
    return [h.memory.content for h in store.recall("where does the user live", limit=10)]


def run(repo: Path, *args: str):
    return CliRunner().invoke(main, ["-C", str(repo), "--agent", "reviewer", *args])


# --- with a language model -------------------------------------------------------------------------


def test_the_model_is_asked_and_its_supersession_is_made_with_its_reason(store: MemoryStore, judged: MemoryStore,
                                                                         endpoint: Endpoint) -> None:
    berlin = judged.remember(BERLIN, category="profile")
    assert endpoint.requests == []  # nothing alike yet: nothing to ask
    endpoint.replies = [verdict("supersede", berlin.id)]
    paris = judged.remember(PARIS, category="profile")
    prompt = endpoint.requests[-1]["json"]["messages"][-1]["content"]
    assert berlin.id in prompt and BERLIN in prompt and PARIS in prompt
    assert paris.action == "created" and paris.supersedes == berlin.id
    assert texts(judged) == [PARIS]
    message = git(judged.root, "log", "-1", "--format=%B")
    assert message.startswith("Supersede profile: The user lives in Paris.")
    assert f"by {paris.id}: judged by the language model: the user moved." in message


@pytest.mark.parametrize("action", ["merge", "repeat", "add"])
def test_merge_repeat_and_add_are_acted_on_and_said_in_the_commit(judged: MemoryStore, endpoint: Endpoint,
                                                                   action: str) -> None:
    berlin = judged.remember(BERLIN, category="profile")
    endpoint.replies = [verdict(action, None if action == "add" else berlin.id, "says it in other words")]
    tip = judged.tip()
    made = judged.remember("The user now lives in Berlin-Kreuzberg.", category="profile")
    if action == "repeat":
        assert made.action == "skipped" and made.id == berlin.id and judged.tip() == tip
        return
    message = git(judged.root, "log", "-1", "--format=%B")
    if action == "merge":
        assert made.action == "merged" and made.id == berlin.id and "Kreuzberg" in judged.get(berlin.id).content
        assert "Action: merged\nReason: judged by the language model: merge " in message
    else:
        assert made.action == "created" and made.id != berlin.id and "contradicts" not in made.extra
        assert "Judged: judged by the language model: add (says it in other words)" in message
    assert_clean(judged.root)


@pytest.mark.parametrize("reply", [
    chat("I think the new memory replaces the old one."),  # not JSON
    chat('{"action": "obliterate", "id": null}'),  # no such action
    chat('{"action": "supersede", "id": "01NOSUCHMEMORY0000000000"}'),  # an id it was not shown
    (500, {}, b"{}"),  # the server fails
    3,  # it stalls past the timeout (1 s)
])
def test_an_answer_that_cannot_be_used_loses_nothing(judged: MemoryStore, endpoint: Endpoint, reply) -> None:  # type: ignore[no-untyped-def]
    berlin = judged.remember(BERLIN, category="profile")
    endpoint.replies = [reply, chat("[]")]
    paris = judged.remember(PARIS, category="profile")
    assert paris.action == "created" and paris.supersedes is None
    assert paris.extra["contradicts"] == [berlin.id]  # written as a new memory, flagged for review
    assert sorted(texts(judged)) == [BERLIN, PARIS]
    assert "Judged: not judged, flagged for review: " in git(judged.root, "log", "-1", "--format=%B")


# --- without one: flagged, then confirmed or dismissed --------------------------------------------------


def test_without_a_model_it_is_flagged_listed_by_check_and_confirmed(store: MemoryStore) -> None:
    berlin = store.remember(BERLIN, category="profile")
    paris = store.remember(PARIS, category="profile")
    assert paris.action == "created" and paris.extra == {"contradicts": [berlin.id]}
    assert f"contradicts: [{berlin.id}]" in paris.path.read_text()
    unrelated = store.remember("The user prefers tabs over spaces.", category="profile")
    assert "contradicts" not in unrelated.extra
    checked = run(store.root, "check")
    assert checked.exit_code == 0, checked.output  # a warning, not a failure
    assert (f"warning: {paris.path.relative_to(store.root)}: possible contradiction: {paris.id} ({PARIS}) may "
            f"replace {berlin.id} ({BERLIN}); confirm with 'memsite supersede {berlin.id} {paris.id}' or dismiss "
            f"with 'memsite dismiss {paris.id} {berlin.id}'") in checked.output
    confirmed = run(store.root, "supersede", berlin.id, paris.id)
    assert confirmed.exit_code == 0, confirmed.output
    assert "contradicts" not in store.get(paris.id).extra
    assert "possible contradiction" not in run(store.root, "check").output
    with MemoryStore(store.root) as now:  # (the CLI wrote at the real time, after the test clock's)
        assert texts(now) == [PARIS, "The user prefers tabs over spaces."]


def test_a_flag_dismissed_leaves_both_memories(store: MemoryStore) -> None:
    berlin = store.remember(BERLIN, category="profile")
    paris = store.remember("The user lives in Paris during the week.", category="profile")
    done = run(store.root, "dismiss", paris.id)
    assert done.exit_code == 0 and done.output.startswith(f"Dismissed: {paris.id} contradicts nothing (commit ")
    assert "contradicts" not in store.get(paris.id).extra
    again = run(store.root, "dismiss", paris.id, berlin.id)
    assert again.exit_code == 1 and again.output == (f"Error: dismiss: memory {paris.id} is not flagged as a possible "
                                                     f"contradiction of {berlin.id}; 'memsite check' lists the flags\n")
    assert len(store.recall("where does the user live")) == 2


def test_a_broken_llm_setting_flags_instead_of_failing_the_write(store: MemoryStore,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSITE_LLM_BASE_URL", "not a url")
    monkeypatch.setenv("MEMSITE_LLM_MODEL", "m")
    with MemoryStore(store.root, agent="planner") as opened:
        berlin = opened.remember(BERLIN, category="profile")
        assert opened.remember(PARIS, category="profile").extra == {"contradicts": [berlin.id]}


def test_no_credential_is_sent_to_the_model(judged: MemoryStore, endpoint: Endpoint) -> None:
    judged.remember("The deploy key of the user lives in the vault.", category="profile")
    with pytest.raises(Exception, match="aws-access-key-id"):
        judged.remember("The deploy key of the user is AKIAQWERTYUIOPASDF23 now.", category="profile")
    assert endpoint.requests == []


# --- writes of many memories: flagged, never judged (a transaction holds the repository lock) -------------------


def test_a_transaction_flags_against_memories_committed_and_staged_in_it(store: MemoryStore) -> None:
    berlin = store.remember(BERLIN, category="profile")
    with store.transaction("Move twice") as tx:
        paris = tx.remember(PARIS, category="profile")
        rome = tx.remember("The user lives in Rome.", category="profile")
        tabs = tx.remember("The user prefers tabs over spaces.", category="profile")
        other = tx.remember("The team lives in Lisbon.", category="general")  # another category: nothing to flag
    assert store.get(paris.id).extra == {"contradicts": [berlin.id]}
    assert sorted(store.get(rome.id).extra["contradicts"]) == sorted([berlin.id, paris.id])
    assert store.get(tabs.id).extra == {} and store.get(other.id).extra == {}
    assert f"possible contradiction: {rome.id}" in run(store.root, "check").output


def test_a_recorded_conversation_and_an_ingest_flag_what_they_may_contradict(store: MemoryStore) -> None:
    from memsite import Extractor

    from .test_ingest import Scripted

    store.record([{"role": "user", "content": BERLIN}])
    store.record([{"role": "user", "content": PARIS}])
    recorded = store.list()[0].category
    store.ingest([{"role": "user", "content": "I moved to Rome."}],
                 Extractor(Scripted([{"content": "The user lives in Rome.", "category": recorded}])),
                 session_key="moved")
    flags = {m.content: m.extra.get("contradicts", []) for m in store.list()}
    berlin, paris = (next(m.id for m in store.list() if m.content == text) for text in (BERLIN, PARIS))
    assert flags[BERLIN] == [] and flags[PARIS] == [berlin]
    assert sorted(flags["The user lives in Rome."]) == sorted([berlin, paris])


def test_a_bulk_write_without_dedup_stores_the_texts_as_given(store: MemoryStore) -> None:
    store.remember(BERLIN, category="profile")
    with store.transaction("Import") as tx:
        paris = tx.remember(PARIS, category="profile", dedupe=False)
    assert store.get(paris.id).extra == {}
