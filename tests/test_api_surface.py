"""The public API is a surface one can name: what ``memsite`` exports, every type its methods take or return,
all of it documented and inside the error boundary.

Read from the package itself, so a public method added later without its types exported, or a class exported
without its methods translated, fails here rather than in a user's traceback.
"""

from __future__ import annotations

import dataclasses
import errno
import inspect
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memsite
from memsite.storage.failures import ENTRY_DUNDERS, inside

API_REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "reference" / "api.md"
# Classes users never construct: the store hands them out (store.start(), store.world, store.transaction()),
# so their constructors, which take the storage beneath, are not part of the API.
MADE_BY_THE_STORE = {"Task", "Transaction", "World"}


def exported() -> Iterator[tuple[str, Any]]:
    for name in memsite.__all__:
        yield name, getattr(memsite, name)


def public_members(cls: type) -> Iterator[tuple[str, Any]]:
    """The methods, properties, class and static methods ``cls`` defines that a user may call."""
    for name, attr in vars(cls).items():
        if name.startswith("_") and (name not in ENTRY_DUNDERS or cls.__name__ in MADE_BY_THE_STORE):
            continue
        if isinstance(attr, (property, classmethod, staticmethod)) or inspect.isfunction(attr):
            yield name, attr


def memsite_types(hint: Any) -> set[type]:
    """The memsite classes a type hint names (``list[Hit] | None`` names Hit)."""
    if typing.get_origin(hint) is not None:
        return set().union(*(memsite_types(arg) for arg in typing.get_args(hint)))
    return {hint} if inspect.isclass(hint) and hint.__module__.startswith("memsite") else set()


def surface_types() -> dict[type, set[str]]:
    """Every memsite type a public callable takes or returns, or an exported record holds -> where."""
    used: dict[type, set[str]] = {}
    for name, obj in exported():
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            continue
        hints: list[tuple[str, Any]] = []
        if inspect.isclass(obj):
            for member, attr in public_members(obj):
                func = inspect.unwrap(attr.fget if isinstance(attr, property) else getattr(attr, "__func__", attr))
                hints += [(f"{name}.{member}", hint) for hint in typing.get_type_hints(func).values()]
            if dataclasses.is_dataclass(obj):
                hints += [(f"{name}.{field}", hint) for field, hint in typing.get_type_hints(obj).items()]
        else:
            hints += [(name, hint) for hint in typing.get_type_hints(inspect.unwrap(obj)).values()]
        for where, hint in hints:
            for kind in memsite_types(hint):
                used.setdefault(kind, set()).add(where)
    return used


def test_every_type_the_public_api_takes_or_returns_is_exported() -> None:
    missing = {f"{kind.__module__}.{kind.__qualname__}": sorted(where) for kind, where in surface_types().items()
               if getattr(memsite, kind.__name__, None) is not kind}
    assert missing == {}


def test_every_exported_name_is_in_the_api_reference() -> None:
    documented = set(re.findall(r"^::: memsite\.(\w+)$", API_REFERENCE.read_text(encoding="utf-8"), re.M))
    assert sorted(set(memsite.__all__) - documented) == []
    assert sorted(documented - set(memsite.__all__)) == []


def test_every_public_callable_is_inside_the_error_boundary() -> None:
    outside = []
    for name, obj in exported():
        if inspect.isclass(obj):
            if issubclass(obj, BaseException):
                continue
            outside += [f"{name}.{member}" for member, attr in public_members(obj) if not inside(attr)]
        elif not inside(obj):
            outside.append(name)
    assert outside == []


def test_a_public_method_added_without_a_decorator_is_translated(tmp_path: Path) -> None:
    """The boundary is structural: a method that leaks an OSError is turned into a memsite error naming the file."""

    class Added:
        root = tmp_path

        def read(self) -> bytes:
            raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "content"))

        def lines(self) -> Iterator[str]:
            yield "first"
            raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "content"))

        def _private(self) -> None:
            raise PermissionError(errno.EACCES, "Permission denied")

    memsite.storage.failures.boundary(Added)
    with pytest.raises(memsite.RepositoryError, match=r"content: Permission denied; nothing was written"):
        Added().read()
    with pytest.raises(memsite.RepositoryError, match=r"content: Permission denied"):  # as it is iterated
        list(Added().lines())
    with pytest.raises(PermissionError):  # not an entry point: left as it is
        Added()._private()


def test_an_os_failure_inside_a_transaction_is_a_memsite_error(store: memsite.MemoryStore,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The transaction a store hands out is inside the boundary too (it is exported)."""
    from memsite.api import storage_of

    def unreadable(*args: Any, **kwargs: Any) -> bytes:
        raise PermissionError(errno.EACCES, "Permission denied", str(store.root / "content"))

    with store.transaction("read") as tx:
        monkeypatch.setattr(storage_of(store).repo, "read_file", unreadable)
        with pytest.raises(memsite.RepositoryError, match=r"content: Permission denied; nothing was written"):
            tx.read_text("content/world.md")
        monkeypatch.undo()
