"""Ids as people type them: the whole id, its short form (its last characters, as the file name ends), or its
first characters, like git's short commit ids.

A short form or a prefix names a memory when it is at least
:data:`MIN_PREFIX` characters long and only one id ends or starts with it;
case does not matter (ULIDs are written in capitals, people type them in
either). A ULID's first ten characters are the time, so the short form is the
end of its random part (:func:`memsite.foundation.record.short_id`). The catalog finds
both in indexes, so the lookup stays about as fast at 100,000 memories as at ten.
"""

from __future__ import annotations

import re
from datetime import datetime

from ..foundation.errors import InvalidInput, NotFound
from ..foundation.record import Memory, one_line, short_id, truncate
from .catalog import Catalog

# What the history says of a removed memory: (commit, author, when, its id, forgotten or trimmed, the reason).
Removal = tuple[str, str, datetime, str, str, str]
MIN_PREFIX = 6
SHOWN = 5  # candidates an ambiguous prefix lists
_PREFIX_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def lookup(catalog: Catalog, text: object, *, live: bool = True) -> Memory | None:
    """The memory whose id is ``text``, or the one whose id starts with it; None when there is none.

    Raises:
        InvalidInput: ``text`` is shorter than an id prefix may be, or more
            than one id starts with it (naming them, with their abstracts).
    """
    if not isinstance(text, str) or not _PREFIX_RE.match(text):
        return None
    if len(text) < MIN_PREFIX:  # (an id has 6 characters or more: no need to look for it)
        raise InvalidInput(f"id {text!r} is too short: give the whole id or at least its first {MIN_PREFIX} "
                           "characters ('memsite list' shows the ids)")
    memory = catalog.get(text, live=live)
    if memory is not None:
        return memory
    starts, started = catalog.starting_with(text, SHOWN)
    ends, ended = catalog.ending_with(text, SHOWN)
    found = dict([*ends, *starts])
    count = len(found) if started + ended <= SHOWN else started + ended
    if count > 1:
        listed = "; ".join(f"{short_id(mid)} {mid} ({truncate(one_line(abstract), 50)})"
                           for mid, abstract in list(found.items())[:SHOWN])
        more = f"; and {count - min(len(found), SHOWN)} more" if count > min(len(found), SHOWN) else ""
        raise InvalidInput(f"id {text!r} is ambiguous: {count} memories have ids starting or ending with it: "
                           f"{listed}{more}; give more of the id")
    return catalog.get(next(iter(found)), live=live) if found else None


def not_found(text: object, removal: Removal | None = None) -> NotFound:
    """The error for an id no memory has; ``removal`` (commit, author, when, id, forgotten or trimmed, reason),
    when the history shows it was removed, says when, by whom and in which commit."""
    message = f"no memory with id {text!r}"
    if removal is None:
        return NotFound(f"{message}; 'memsite list' shows the ids")
    sha, author, when, mid, action, reason = removal
    which = "it" if mid == text else mid
    why = f"; reason: {reason}" if reason else ""
    return NotFound(f"{message}: {which} was {action} on {when:%Y-%m-%d %H:%M} UTC by {author} "
                    f"(commit {sha[:12]}{why})")
