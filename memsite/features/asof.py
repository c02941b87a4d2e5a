"""Memory as it stood at a moment, by two clocks.

*Valid time* is what the memory says now about that moment: the memories
written by then that still held then (no ``valid_until``, or a later one).
A fact found out later to have stopped holding earlier is left out.

*Record time* is what the team believed then: the memories as they were
after the last commit on the branch before that moment, read from git
(:meth:`memsite.storage.Storage.at_commit`).
"""

from __future__ import annotations

from datetime import datetime

from ..foundation.errors import InvalidInput
from ..foundation.inputs import moment as read_moment


def moment(value: object, now: datetime, first: datetime | None, where: str = "as_of") -> datetime:
    """The moment ``value`` names, in UTC, checked to lie between the first commit (``first``) and ``now``.

    ``value`` is what ``since`` and ``until`` take (:func:`memsite.foundation.inputs.moment`):
    a datetime, ``2026-03-01`` (the end of that day: what held once it was over;
    today means now), an ISO time, ``"2 weeks ago"``, ``"yesterday"``.

    Raises:
        InvalidInput: not a time, in the future, or before the first commit (one line naming it).
    """
    when = read_moment(value, where, now, end_of_day=True)
    assert when is not None
    when = when.replace(microsecond=0)
    if when > now and when.date() == now.date() and not isinstance(value, datetime) and \
            (not isinstance(value, str) or len(value.strip()) <= 10):
        when = now  # a day that is not over yet: as it stands now
    if when > now:
        raise InvalidInput(f"{where}: {_shown(value)} is in the future (now is {now:%Y-%m-%d %H:%M} UTC); "
                           "give a time that has passed")
    if first is None or when < first:
        since = f"its first commit is from {first:%Y-%m-%d %H:%M} UTC" if first else "it has no commit yet"
        raise InvalidInput(f"{where}: {_shown(value)} is before this memory repository existed ({since}); "
                           "give a later time")
    return when


def _shown(value: object) -> str:
    return value.isoformat() if isinstance(value, datetime) else repr(value)
