"""memsite as a LangGraph store (the ``memsite[langgraph]`` extra).

    from langgraph.graph import StateGraph
    from memsite import MemoryStore
    from memsite.integrations.langgraph import MemsiteStore

    graph = StateGraph(...).compile(store=MemsiteStore(MemoryStore("agent-memory", agent="assistant")))

:class:`MemsiteStore` is a ``langgraph.store.base.BaseStore``: what a graph's
nodes ``put``, ``get``, ``search`` and ``delete`` are memories in a git
repository, each put or delete a commit by the store's agent (a batch of them
one commit), readable on the site and reviewable as a pull request.

An item is one memory. Its body is the item as JSON (namespace, key, value)
in a fenced block, so ``get`` returns exactly the value that was put; its
abstract sums the value up in a line; its tags are ``langgraph`` and the
namespace's labels (those that are valid tags), its source ``langgraph``. A
put to the same namespace and key updates that memory (same id, no dedup
merge); a put of a value that changes nothing makes no commit. ``search``
with a ``query`` ranks by memsite's recall (words, and meaning with an
embedder) and counts as a recall of what it returns; ``filter`` compares
value fields as LangGraph's ``InMemoryStore`` does. Without a query, items
come oldest first, grouped by namespace (namespaces in the order of their
oldest item), as ``InMemoryStore`` returns them in most cases.

What memsite refuses, LangGraph's stores accept: a value that is not JSON
(a datetime, a tuple, a NaN, a non-text key), a credential, a value over
``max_memory_bytes``. The batch fails, with one line naming the item and the
field, and nothing of it is written. Namespaces are checked as ``put`` checks
them (no ``.``, no empty label, no ``langgraph`` root), for ``batch`` too.
TTLs are not supported; the ``index`` of a put is ignored (all text is searchable).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard

from ..foundation import inputs
from ..foundation.errors import InvalidInput
from ..foundation.record import one_line, truncate
from . import unusable

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        validate_op_namespace,
    )
except ImportError as exc:
    raise ImportError(unusable("memsite's LangGraph store", "langgraph", "1.2 or later", "langgraph", exc)) from exc

if TYPE_CHECKING:
    from datetime import datetime

    from ..api import MemoryStore
    from ..foundation.record import Memory

TAG = "langgraph"
FENCE = "```json\n"
Namespace = tuple[str, ...]


@dataclass(frozen=True)
class _Entry:
    """An item as the repository holds it: the memory's id (creation order) and times, the value's JSON."""

    id: str
    value: str
    created: datetime
    updated: datetime

    def item(self, namespace: Namespace, key: str) -> Item:
        return Item(value=json.loads(self.value), key=key, namespace=namespace, created_at=self.created,
                    updated_at=self.updated)


class MemsiteStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are memories in a memsite repository.

    Args:
        store: the memory repository, opened as the agent that writes.
        category: the category items are written to (``general``); give it no
            capacity marks, or trimming would remove items.
        supersede: a put that changes an item's value writes a new memory
            that supersedes the old one (the old value stays in the
            repository, marked superseded, shown in its chain and on the
            site) instead of changing the memory in place.

    Raises:
        InvalidInput: an unknown ``category``.
    """

    __slots__ = ("store", "category", "supersede", "_items", "_tip")

    def __init__(self, store: MemoryStore, *, category: str = "general", supersede: bool = False) -> None:
        self.store = store
        self.supersede = supersede
        self.category = store.config.route(category).name
        self._items: dict[Namespace, dict[str, _Entry]] = {}
        self._tip: str | None = ""  # the commit _items reflects ("" : none yet)

    # --- BaseStore ----------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations; reads see the store as it was before the batch's puts, which are one commit."""
        ops = list(ops)
        puts = {(op.namespace, op.key): op for op in ops if _checked(op)}  # the last put of an item wins
        contents = {where: None if op.value is None else _content(op.namespace, op.key, op.value)
                    for where, op in puts.items()}
        self._catch_up()
        results = [None if isinstance(op, PutOp) else self._read(op) for op in ops]
        if puts:
            self._write(contents)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread."""
        return await asyncio.to_thread(self.batch, list(ops))

    # --- reads --------------------------------------------------------------------------

    def _read(self, op: GetOp | SearchOp | ListNamespacesOp) -> Result:
        if isinstance(op, GetOp):
            entry = self._items.get(op.namespace, {}).get(op.key)
            return None if entry is None else entry.item(op.namespace, op.key)
        if isinstance(op, SearchOp):
            return self._search(op)
        return self._namespaces(op)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.query:
            return self._recall(op)
        found = [(namespace, key, entry) for namespace, key, entry in self._in_order(op.namespace_prefix)
                 if _matches(entry, op.filter)]
        return [_search_item(namespace, key, entry, None) for namespace, key, entry in found[op.offset:][:op.limit]]

    def _in_order(self, prefix: Namespace) -> list[tuple[Namespace, str, _Entry]]:
        """Items under ``prefix``: namespaces in the order of their oldest item, items oldest first."""
        spaces = [(min(entries.values(), key=_by_id).id, namespace, entries)
                  for namespace, entries in self._items.items() if namespace[:len(prefix)] == prefix]
        return [(namespace, key, entry) for _, namespace, entries in sorted(spaces, key=lambda s: s[0])
                for key, entry in sorted(entries.items(), key=lambda pair: pair[1].id)]

    def _recall(self, op: SearchOp) -> list[SearchItem]:
        """Recall over the items under the prefix, best first; asks recall for more while filters drop hits."""
        assert op.query  # (a search without a query lists, in order)
        wanted = op.offset + op.limit
        asked = max(wanted, 1)
        while True:
            hits = self.store.recall(op.query, asked, category=self.category,
                                     tags=[TAG, *_tags(op.namespace_prefix)])
            found = []
            for hit in hits:
                where = _where(hit.memory)
                if where is not None and where[0][:len(op.namespace_prefix)] == op.namespace_prefix:
                    entry = self._items.get(where[0], {}).get(where[1])
                    if entry is not None and entry.id == hit.memory.id and _matches(entry, op.filter):
                        found.append(_search_item(*where, entry, hit.score))
            if len(found) >= wanted or len(hits) < asked:
                return found[op.offset:][:op.limit]
            asked *= 4

    def _namespaces(self, op: ListNamespacesOp) -> list[Namespace]:
        spaces = [ns for ns in self._items if all(_fits(condition, ns) for condition in op.match_conditions or ())]
        if op.max_depth is not None:
            spaces = list({ns[:op.max_depth] for ns in spaces})
        return sorted(spaces)[op.offset:][:op.limit]

    # --- keeping up with the repository ---------------------------------------------------

    def _catch_up(self) -> None:
        """Read the items again when the branch moved by another hand (a process, a person, a flush of recalls)."""
        tip = self.store.tip()
        if tip == self._tip:
            return
        items: dict[Namespace, dict[str, _Entry]] = {}
        for memory in self.store.list(category=self.category):
            if memory.superseded_by is not None:  # an earlier value of an item (see ``supersede``)
                continue
            where = _where(memory)
            if where is not None:
                items.setdefault(where[0], {})[where[1]] = _entry(memory)
        self._items, self._tip = items, tip

    def _write(self, contents: dict[tuple[Namespace, str], tuple[str, str, tuple[str, ...]] | None]) -> None:
        """Apply the puts and deletes in one commit, then note them (their commit is the new tip)."""
        with self.store.transaction(_subject(contents)) as tx:
            self._catch_up()  # under the repository's lock: no other writer moves the branch now
            done: dict[tuple[Namespace, str], _Entry | None] = {}
            for (namespace, key), content in contents.items():
                entry = self._items.get(namespace, {}).get(key)
                if content is None:
                    if entry is not None:
                        tx.forget(entry.id, reason=f"LangGraph delete of {_label(namespace, key)}")
                        done[namespace, key] = None
                    continue
                body, abstract, tags = content
                overview = f"LangGraph item {_label(namespace, key)}"
                if entry is None or self.supersede:
                    if entry is not None and json.loads(entry.value) == json.loads(body[len(FENCE):-4])["value"]:
                        continue  # the same value: nothing changes
                    memory = tx.remember(body, category=self.category, abstract=abstract, overview=overview,
                                         tags=tags, source=TAG, dedupe=False,
                                         supersedes=None if entry is None else entry.id)
                else:
                    memory = tx.update(entry.id, content=body, abstract=abstract, overview=overview, tags=tags)
                done[namespace, key] = _entry(memory)
        for (namespace, key), entry in done.items():
            if entry is None:
                entries = self._items[namespace]
                del entries[key]
                if not entries:
                    del self._items[namespace]
            else:
                self._items.setdefault(namespace, {})[key] = entry
        if tx.commit is not None:
            self._tip = tx.commit


# --- checking what comes in ----------------------------------------------------------------


def _checked(op: Op) -> TypeGuard[PutOp]:
    """Whether ``op`` is a put; raises what ``put`` would for a namespace it refuses, and for a non-JSON value."""
    if not isinstance(op, (GetOp, PutOp, SearchOp, ListNamespacesOp)):
        raise TypeError(f"unknown operation {type(op).__name__}; expected GetOp, PutOp, SearchOp or ListNamespacesOp")
    validate_op_namespace(op)
    if not isinstance(op, PutOp):
        return False
    if not op.namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    if op.namespace[0] == "langgraph":
        raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {op.namespace}')
    if not isinstance(op.key, str):
        raise InvalidInput(f"{_label(op.namespace, op.key)}: key: expected text, got {type(op.key).__name__}")
    if op.value is not None:
        if not isinstance(op.value, Mapping):
            raise InvalidInput(f"{_label(op.namespace, op.key)}: value: expected a mapping (a dict), "
                               f"got {type(op.value).__name__}")
        _json(op.value, f"{_label(op.namespace, op.key)}: value")
    return True


def _json(value: Any, where: str) -> None:
    """Refuse what JSON would not give back as it was: other types, non-text keys, NaN and infinities."""
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"{where}: {value} is not a JSON number; store a finite number or text")
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _json(item, f"{where}[{i}]")
        return
    if isinstance(value, Mapping):
        for name, item in value.items():
            if not isinstance(name, str):
                raise InvalidInput(f"{where}: key {name!r} is not text; JSON object keys are text")
            _json(item, f"{where}.{name}")
        return
    raise InvalidInput(f"{where}: a {type(value).__name__} is not JSON; store text, numbers, true/false, null, "
                       "lists and objects")


def _content(namespace: Namespace, key: str, value: Mapping[str, Any]) -> tuple[str, str, tuple[str, ...]]:
    """The memory of an item: its body (the item as JSON), its abstract and its tags."""
    def dump(data: Any, indent: int | None = None) -> str:  # (JSON text has no newline inside a string)
        return json.dumps(data, ensure_ascii=False, indent=indent).replace("\n", "\n  ")

    body = f'{{\n  "namespace": {dump(list(namespace))},\n  "key": {dump(key)},\n  "value": {dump(value, 2)}\n}}'
    return f"{FENCE}{body}\n```", _abstract(namespace, key, value), (TAG, *_tags(namespace))


def _abstract(namespace: Namespace, key: str, value: Mapping[str, Any]) -> str:
    """A line a person reads: the text of a one-field value, else its fields (``theme: dark; size: 3``)."""
    texts = [v for v in value.values() if isinstance(v, str) and v.strip()]
    if len(value) == 1 and len(texts) == 1:
        line = one_line(texts[0])
    else:
        line = "; ".join(f"{name}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
                         for name, v in value.items())
    return truncate(one_line(line), 200) or _label(namespace, key)


def _tags(namespace: Namespace) -> list[str]:
    """The labels of ``namespace`` that are valid tags (a label with a space or a '/' is not)."""
    tags: list[str] = []
    for label in namespace:
        try:
            tags += inputs.tags([label])
        except InvalidInput:
            pass
    return [tag for tag in dict.fromkeys(tags) if tag != TAG]


def _subject(contents: Mapping[tuple[Namespace, str], Any]) -> str:
    if len(contents) == 1:
        (namespace, key), content = next(iter(contents.items()))
        return truncate(f"LangGraph {'delete' if content is None else 'put'} {_label(namespace, key)}", 72)
    deletes = sum(content is None for content in contents.values())
    return f"LangGraph batch: {len(contents) - deletes} put(s), {deletes} delete(s)"


def _label(namespace: Namespace, key: Any) -> str:
    return "/".join([*namespace, str(key)])


# --- reading what the repository holds --------------------------------------------------


def _where(memory: Memory) -> tuple[Namespace, str] | None:
    """The (namespace, key) of a memory written by this store; None for any other memory."""
    data = _data(memory)
    return None if data is None else (tuple(data["namespace"]), data["key"])


def _data(memory: Memory) -> dict[str, Any] | None:
    content = memory.content
    if not content.startswith(FENCE) or not content.endswith("\n```"):
        return None
    try:
        data = json.loads(content[len(FENCE):-4])
    except json.JSONDecodeError:
        return None
    if not (isinstance(data, dict) and isinstance(data.get("key"), str) and isinstance(data.get("value"), dict)
            and isinstance(data.get("namespace"), list) and data["namespace"]
            and all(isinstance(label, str) for label in data["namespace"])):
        return None
    return data


def _entry(memory: Memory) -> _Entry:
    data = _data(memory)
    assert data is not None
    return _Entry(memory.id, json.dumps(data["value"], ensure_ascii=False), memory.created, memory.updated)


def _by_id(entry: _Entry) -> str:
    return entry.id


def _search_item(namespace: Namespace, key: str, entry: _Entry, score: float | None) -> SearchItem:
    return SearchItem(namespace=namespace, key=key, value=json.loads(entry.value), created_at=entry.created,
                      updated_at=entry.updated, score=score)


def _fits(condition: MatchCondition, namespace: Namespace) -> bool:
    """``namespace`` starts (``prefix``) or ends (``suffix``) with the condition's path; ``*`` fits any label."""
    path = condition.path
    if len(namespace) < len(path):
        return False
    labels = namespace[:len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path):]
    return all(wanted in ("*", label) for wanted, label in zip(path, labels))


def _matches(entry: _Entry, wanted: Mapping[str, Any] | None) -> bool:
    """Whether the item's value passes ``filter``: fields equal, or compared with $eq $ne $gt $gte $lt $lte."""
    if not wanted:
        return True
    value = json.loads(entry.value)
    return all(_compare(value.get(name), expected) for name, expected in wanted.items())


def _compare(value: Any, expected: Any) -> bool:
    """InMemoryStore's comparison (PostgreSQL's JSONB semantics): nested objects field by field, lists in order."""
    if isinstance(expected, dict):
        if any(k.startswith("$") for k in expected):
            return all(_operator(value, op, operand) for op, operand in expected.items())
        return isinstance(value, dict) and all(_compare(value.get(k), v) for k, v in expected.items())
    if isinstance(expected, (list, tuple)):
        return (isinstance(value, (list, tuple)) and len(value) == len(expected)
                and all(_compare(v, e) for v, e in zip(value, expected)))
    return bool(value == expected)


def _operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    compare = {"$gt": float.__gt__, "$gte": float.__ge__, "$lt": float.__lt__, "$lte": float.__le__}.get(operator)
    if compare is None:
        raise ValueError(f"Unsupported operator: {operator}")
    try:
        return bool(compare(float(value), float(operand)))
    except (TypeError, ValueError):  # a missing field, or one that is no number: no match (InMemoryStore raises)
        return False
