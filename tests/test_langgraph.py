"""memsite as a LangGraph store, checked against LangGraph's own InMemoryStore.

LangGraph has no conformance suite for stores: the same operation sequences
run against ``langgraph.store.memory.InMemoryStore`` (the reference) and
MemsiteStore over a real git repository, and every result must be equal.
One thing LangGraph leaves to each store is the order of a search without a
query (InMemoryStore: its dicts' order; its Postgres store: the newest update
first). There the same items must come back, and each page must be that
slice of the store's own order.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsite import MemoryStore
from memsite.foundation.errors import InvalidInput

from .conftest import git, head

pytest.importorskip("langgraph")
from langgraph.store.base import InvalidNamespaceError, PutOp
from langgraph.store.memory import InMemoryStore

from memsite.integrations.langgraph import MemsiteStore

ROOT = Path(__file__).resolve().parent.parent

# --- the same operations against both stores ---------------------------------------------

# Few labels and keys, so that sequences put, update and delete the same items often.
labels = st.sampled_from(["users", "a b", "ünï/x"])
namespaces = st.lists(labels, min_size=1, max_size=2).map(tuple)
keys = st.sampled_from(["prefs", "x/y", "", "ключ"])
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3), max_leaves=6)
# Every value has a number "n" and a label "kind": the fields filters compare.
values = st.builds(lambda n, kind, rest: {**rest, "n": n, "kind": kind}, st.integers(0, 5),
                   st.sampled_from(["note", "pref"]), st.dictionaries(st.sampled_from(["text", "tags", "meta"]),
                                                                       json_values, max_size=2))
filters = st.one_of(st.none(), st.fixed_dictionaries({"kind": st.sampled_from(["note", "pref"])}),
                    st.builds(lambda op, n: {"n": {op: n}},
                              st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]),
                              st.integers(0, 5)))
operations = st.one_of(
    st.tuples(st.just("put"), namespaces, keys, values),
    st.tuples(st.just("delete"), namespaces, keys),
    st.tuples(st.just("get"), namespaces, keys),
    st.tuples(st.just("search"), st.lists(labels, max_size=2).map(tuple), filters, st.integers(0, 6),
              st.integers(0, 3)),
    st.tuples(st.just("search"), st.lists(labels, max_size=1).map(tuple), filters, st.just(1000), st.just(0)),
    st.tuples(st.just("list"), st.lists(labels, max_size=1).map(tuple), st.lists(labels, max_size=1).map(tuple),
              st.one_of(st.none(), st.integers(1, 2)), st.integers(0, 6), st.integers(0, 2)),
    st.tuples(st.just("batch"), st.lists(st.tuples(namespaces, keys, st.one_of(st.none(), values)), min_size=1,
                                         max_size=3)),
)


def run(store: Any, operation: tuple[Any, ...]) -> Any:
    """One operation through the BaseStore API every LangGraph store has; the result as plain data."""
    kind, *args = operation
    if kind == "put":
        return store.put(*args)
    if kind == "delete":
        return store.delete(*args)
    if kind == "get":
        item = store.get(*args)
        return None if item is None else (item.namespace, item.key, item.value)
    if kind == "search":
        prefix, wanted, limit, offset = args
        return [(i.namespace, i.key, i.value) for i in store.search(prefix, filter=wanted, limit=limit, offset=offset)]
    if kind == "list":
        prefix, suffix, depth, limit, offset = args
        return store.list_namespaces(prefix=prefix or None, suffix=suffix or None, max_depth=depth, limit=limit,
                                     offset=offset)
    return store.batch([PutOp(namespace, key, value) for namespace, key, value in args[0]])


def forget_empty_namespaces(reference: InMemoryStore) -> None:
    """InMemoryStore lists a namespace for ever once anything touched it, even a get that found nothing;
    its database stores (and memsite) list the namespaces that hold items. The reference drops the others."""
    for namespace in [ns for ns, items in reference._data.items() if not items]:
        del reference._data[namespace]


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(st.lists(operations, min_size=1, max_size=14))
def test_any_sequence_of_operations_gives_what_inmemorystore_gives(sequence: list[tuple[Any, ...]]) -> None:
    reference = InMemoryStore()
    with tempfile.TemporaryDirectory() as tmp, MemoryStore.init(Path(tmp) / "memory", agent="graph") as memory:
        store = MemsiteStore(memory)
        for step, operation in enumerate(sequence):
            expected = run(reference, operation)
            forget_empty_namespaces(reference)
            if operation[0] != "search":
                assert run(store, operation) == expected, f"step {step}: {operation}"
                continue
            _, prefix, wanted, limit, offset = operation
            every = run(reference, ("search", prefix, wanted, 1000, 0))
            own_order = run(store, ("search", prefix, wanted, 1000, 0))
            assert sorted(map(repr, own_order)) == sorted(map(repr, every)), f"step {step}: {operation}"
            page = own_order[offset:][:limit]
            assert run(store, operation) == page and len(expected) == len(page)
        again = MemsiteStore(MemoryStore(memory.root, agent="reader"))  # what the repository holds, read afresh
        assert sorted(map(repr, run(again, ("search", (), None, 1000, 0)))) == \
            sorted(map(repr, run(reference, ("search", (), None, 1000, 0))))
        assert git(memory.root, "status", "--porcelain") == ""


# --- what a user of the repository sees ------------------------------------------------------


def log(repo: Path) -> list[str]:
    return git(repo, "log", "--format=%an %s").splitlines()


def test_items_are_memories_each_put_and_delete_a_commit_by_the_agent(store: MemoryStore) -> None:
    graph = MemsiteStore(store)
    graph.put(("users", "alice"), "prefs", {"memory": "Alice prefers dark mode"})
    graph.put(("users", "alice"), "drink", {"memory": "Alice prefers dark mode"})  # the same value: no dedup merge
    (first,) = [m for m in store.list() if "prefs" in m.content]
    assert log(store.root)[:2] == ["planner LangGraph put users/alice/drink", "planner LangGraph put users/alice/prefs"]
    assert len(store.list()) == 2

    graph.put(("users", "alice"), "prefs", {"memory": "Alice prefers dark mode and large fonts"})
    (updated,) = [m for m in store.list() if "prefs" in m.content]
    assert updated.id == first.id and updated.abstract == "Alice prefers dark mode and large fonts"
    assert updated.tags == ("langgraph", "users", "alice") and updated.source == "langgraph"
    text = updated.path.read_text()
    assert '"namespace": ["users", "alice"],\n  "key": "prefs",' in text  # the item, readable in the file
    assert graph.get(("users", "alice"), "prefs").value == {"memory": "Alice prefers dark mode and large fonts"}

    before = head(store.root)
    graph.put(("users", "alice"), "prefs", {"memory": "Alice prefers dark mode and large fonts"})
    assert head(store.root) == before  # nothing changed, nothing committed
    graph.delete(("users", "alice"), "prefs")
    assert log(store.root)[0] == "planner LangGraph delete users/alice/prefs"
    assert graph.get(("users", "alice"), "prefs") is None
    graph.batch([PutOp(("users", "bob"), "a", {"n": 1}), PutOp(("users", "bob"), "b", {"n": 2}),
                 PutOp(("users", "alice"), "drink", None)])
    assert log(store.root)[0] == "planner LangGraph batch: 2 put(s), 1 delete(s)"
    assert git(store.root, "status", "--porcelain") == ""


def test_search_with_a_query_ranks_by_recall_within_the_namespace_and_filter(store: MemoryStore) -> None:
    graph = MemsiteStore(store)
    graph.put(("users", "alice"), "editor", {"memory": "Alice writes Python in vim with tabs", "kind": "pref"})
    graph.put(("users", "alice"), "trip", {"memory": "Alice flies to Lisbon in May", "kind": "event"})
    graph.put(("users", "bob"), "editor", {"memory": "Bob writes Python in emacs", "kind": "pref"})
    store.remember("Python style notes that are not LangGraph items", category="general")

    hits = graph.search(("users", "alice"), query="which editor for python")
    assert [(h.namespace, h.key) for h in hits] == [(("users", "alice"), "editor")] and hits[0].score > 0
    everyone = graph.search(("users",), query="python editor")
    assert {(h.namespace[1], h.key) for h in everyone} == {("alice", "editor"), ("bob", "editor")}
    assert graph.search(("users",), query="python", filter={"kind": "event"}) == []
    assert [h.key for h in graph.search((), query="Lisbon")] == ["trip"]


@pytest.mark.slow
def test_two_processes_see_each_others_writes(store: MemoryStore) -> None:
    graph = MemsiteStore(store)
    graph.put(("users", "alice"), "prefs", {"theme": "dark"})
    other = textwrap.dedent(f"""
        from memsite import MemoryStore
        from memsite.integrations.langgraph import MemsiteStore
        graph = MemsiteStore(MemoryStore({str(store.root)!r}, agent="other"))
        assert graph.get(("users", "alice"), "prefs").value == {{"theme": "dark"}}
        graph.put(("users", "alice"), "prefs", {{"theme": "light"}})
        graph.put(("users", "bob"), "prefs", {{"theme": "blue"}})
    """)
    subprocess.run([sys.executable, "-c", other], check=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                                                                    "HOME": str(store.root.parent)})
    assert graph.get(("users", "alice"), "prefs").value == {"theme": "light"}
    assert graph.list_namespaces() == [("users", "alice"), ("users", "bob")]
    assert log(store.root)[:2] == ["other LangGraph put users/bob/prefs", "other LangGraph put users/alice/prefs"]
    graph.delete(("users", "bob"), "prefs")
    assert log(store.root)[0] == "planner LangGraph delete users/bob/prefs"


def test_async_operations(store: MemoryStore) -> None:
    graph = MemsiteStore(store)

    async def run_async() -> Any:
        await graph.aput(("users", "alice"), "prefs", {"theme": "dark"})
        return (await graph.aget(("users", "alice"), "prefs")).value, await graph.alist_namespaces()

    assert asyncio.run(run_async()) == ({"theme": "dark"}, [("users", "alice")])


@pytest.mark.parametrize("call", [
    lambda s: s.put(("users.alice",), "prefs", {"x": 1}),
    lambda s: s.put(("users", ""), "prefs", {"x": 1}),
    lambda s: s.put((), "prefs", {"x": 1}),
    lambda s: s.put(("langgraph", "x"), "prefs", {"x": 1}),
    lambda s: s.put(("users", 5), "prefs", {"x": 1}),
    lambda s: s.get(("a.b",), "prefs"),
    lambda s: s.search(("a.b",)),
    lambda s: s.list_namespaces(prefix=("a.b",)),
])
def test_a_namespace_put_refuses_is_refused_with_inmemorystores_error_and_nothing_is_written(
        store: MemoryStore, call: Any) -> None:
    with pytest.raises(InvalidNamespaceError) as expected:
        call(InMemoryStore())
    before = head(store.root)
    with pytest.raises(InvalidNamespaceError) as refused:
        call(MemsiteStore(store))
    assert str(refused.value) == str(expected.value)
    assert head(store.root) == before


def test_a_batch_with_a_bad_operation_writes_nothing_of_it(store: MemoryStore) -> None:
    graph = MemsiteStore(store)
    before = head(store.root)
    with pytest.raises(InvalidNamespaceError, match="Namespace labels cannot contain periods"):
        graph.batch([PutOp(("users",), "a", {"n": 1}), PutOp(("users.alice",), "b", {"n": 2})])
    with pytest.raises(InvalidNamespaceError, match='Root label for namespace cannot be "langgraph"'):
        graph.batch([PutOp(("users",), "a", {"n": 1}), PutOp(("langgraph",), "b", {"n": 2})])
    assert head(store.root) == before and graph.search(()) == []


@pytest.mark.parametrize("value, message", [
    ({"when": __import__("datetime").date(2026, 11, 1)}, "users/prefs: value.when: a date is not JSON"),
    ({"pair": (1, 2)}, "users/prefs: value.pair: a tuple is not JSON"),
    ({"score": float("nan")}, "users/prefs: value.score: nan is not a JSON number"),
    ({"nested": {1: "one"}}, "users/prefs: value.nested: key 1 is not text"),
    (["not", "a", "mapping"], "users/prefs: value: expected a mapping (a dict), got list"),
    ({"token": "AKIAQWERTYUIOPASDF23"}, "aws-access-key-id"),
    ({"text": "x" * 70_000}, "over the 65536-byte cap"),
])
def test_a_value_memsite_cannot_keep_is_refused_in_one_line_and_nothing_is_written(
        store: MemoryStore, value: Any, message: str) -> None:
    graph = MemsiteStore(store)
    graph.put(("users",), "other", {"n": 1})
    before = head(store.root)
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(").replace(")", r"\)")) as refused:
        graph.batch([PutOp(("users",), "first", {"n": 2}), PutOp(("users",), "prefs", value)])
    assert "\n" not in str(refused.value)
    assert head(store.root) == before and graph.get(("users",), "first") is None


def test_keys_with_path_separators_are_kept_as_inmemorystore_keeps_them(store: MemoryStore) -> None:
    graph, reference = MemsiteStore(store), InMemoryStore()
    for each in (graph, reference):
        each.put(("users",), "../../etc/passwd", {"n": 1})
        each.put(("users",), "a\\b", {"n": 2})
    assert ([(i.key, i.value) for i in graph.search(("users",))]
            == [(i.key, i.value) for i in reference.search(("users",))])
    assert not (store.root / "etc").exists() and git(store.root, "status", "--porcelain") == ""


def test_without_a_query_items_come_oldest_first_grouped_by_namespace(store: MemoryStore) -> None:
    graph = MemsiteStore(store)
    for namespace, key in [(("A",), "a1"), (("B",), "b1"), (("A",), "a2"), (("B",), "b2")]:
        graph.put(namespace, key, {"n": 1})
    graph.put(("A",), "a1", {"n": 2})  # an update keeps its place
    assert [i.key for i in graph.search(())] == ["a1", "a2", "b1", "b2"]
    assert [i.key for i in graph.search((), limit=2, offset=1)] == ["a2", "b1"]


def test_the_guide_graph_keeps_a_preference_and_finds_it_in_a_later_conversation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import re

    guide = ROOT / "docs" / "guides" / "agents.md"
    (example,) = [b for b in re.findall(r"```python\n(.*?)```", guide.read_text(), re.S) if "MemsiteStore(" in b]
    monkeypatch.chdir(tmp_path)
    MemoryStore.init(tmp_path / "agent-memory", agent="setup").close()
    exec(compile(example, str(guide), "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out == "I prefer answers in French\n"
    assert log(tmp_path / "agent-memory")[0] == "assistant LangGraph put users/alice/preference"


def test_with_supersede_a_changed_value_keeps_the_old_one_as_a_superseded_memory(store: MemoryStore) -> None:
    graph_store = MemsiteStore(store, supersede=True)
    graph_store.put(("users", "ada"), "home", {"city": "Berlin"})
    graph_store.put(("users", "ada"), "home", {"city": "Paris"})
    before = head(store.root)
    graph_store.put(("users", "ada"), "home", {"city": "Paris"})  # the same value: no commit
    assert head(store.root) == before
    assert graph_store.get(("users", "ada"), "home").value == {"city": "Paris"}
    assert [item.value for item in graph_store.search(("users",), query="city")] == [{"city": "Paris"}]
    old, new = store.list()
    assert old.superseded_by == new.id and new.supersedes == old.id and '"Berlin"' in old.content
    assert MemsiteStore(store, supersede=True).get(("users", "ada"), "home").value == {"city": "Paris"}
