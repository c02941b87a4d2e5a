"""Chains of memories that replaced one another: who supersedes whom, and what may supersede what.

A memory that stopped being true is not deleted: the memory that replaced it
names it (``supersedes``), and it names its successor and the time it
stopped holding (``superseded_by``, ``valid_until``). Followed either way,
those links give the chain, oldest first. The checks here run before
anything is staged, so a refused supersession writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from ..foundation.errors import InvalidInput, NotFound
from ..foundation.record import Memory

MAX_CHAIN = 1000  # links followed at most: a chain edited by hand into a loop ends here


def chain(memory: Memory, get: Callable[[str], Memory]) -> list[Memory]:
    """Every memory of ``memory``'s chain, oldest first (``[memory]`` when it never replaced or was replaced).

    A link to a memory that is gone (forgotten, trimmed) ends the chain there.
    """
    seen = {memory.id}
    older = _walk(memory, "supersedes", get, seen)
    return [*older[::-1], memory, *_walk(memory, "superseded_by", get, seen)]


def _walk(memory: Memory, link: str, get: Callable[[str], Memory], seen: set[str]) -> list[Memory]:
    """The memories ``link`` (``supersedes`` or ``superseded_by``) leads to from ``memory``, nearest first,
    up to one already ``seen`` (a cycle), one that is gone, or :data:`MAX_CHAIN` in all."""
    found: list[Memory] = []
    current: Memory | None = memory
    while current is not None and (following := getattr(current, link)) is not None \
            and following not in seen and len(seen) < MAX_CHAIN:
        current = _found(get, following)
        if current is not None:
            seen.add(current.id)
            found.append(current)
    return found


def newest(memory: Memory, get: Callable[[str], Memory]) -> Memory:
    """The last memory of ``memory``'s chain: the one that holds now."""
    return chain(memory, get)[-1]


def check(old: Memory, new: Memory, get: Callable[[str], Memory], *, where: str = "supersedes") -> None:
    """Refuse to mark ``old`` superseded by ``new`` when it cannot be; one line naming the fix.

    Another category is allowed (a fact may move: the caller shows it).

    Raises:
        InvalidInput: the same memory, ``old`` superseded already (naming the
            newest of its chain, the one to supersede instead), ``new``
            superseding another already, or a cycle.
    """
    if old.id == new.id:
        raise InvalidInput(f"{where}: {old.id} cannot supersede itself; name the memory the new one replaces")
    if old.superseded_by is not None:
        last = newest(old, get)
        when = f" on {old.valid_until:%Y-%m-%d}" if old.valid_until else ""
        instead = (f"supersede the newest, {last.id} ({_quoted(last)}), instead" if last.id != new.id
                   else "nothing to do")
        raise InvalidInput(f"{where}: {old.id} was already superseded by {old.superseded_by}{when}; {instead}")
    later = chain(new, get) if new.superseded_by is not None else [new]
    if any(m.id == old.id for m in later):
        path = " → ".join(m.id for m in later[[m.id for m in later].index(new.id):])
        raise InvalidInput(f"{where}: superseding {old.id} by {new.id} would make a cycle ({path}); "
                           "a chain runs one way, oldest to newest")
    if new.supersedes is not None:
        raise InvalidInput(f"{where}: {new.id} already supersedes {new.supersedes}; a memory replaces one other, "
                           "so write a new memory to replace this one too")
    if new.superseded_by is not None:
        raise InvalidInput(f"{where}: {new.id} was itself superseded by {new.superseded_by}; supersede {old.id} "
                           f"by the newest, {later[-1].id} ({_quoted(later[-1])}), instead")


def existing(get: Callable[[str], Memory], mid: str, where: str) -> Memory:
    """The memory ``mid``; NotFound naming ``where`` (the argument) otherwise."""
    try:
        return get(mid)
    except NotFound as exc:
        raise NotFound(f"{where}: {exc}") from None


def _found(get: Callable[[str], Memory], mid: str) -> Memory | None:
    try:
        return get(mid)
    except NotFound:
        return None


def _quoted(memory: Memory) -> str:
    abstract = memory.abstract if len(memory.abstract) <= 60 else memory.abstract[:59] + "…"
    return f"'{abstract}'"
