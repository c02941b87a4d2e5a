"""Memory as it stood at a moment, by two clocks.

*Valid time* is what the memory says now about that moment: the memories
written by then that still held then (no ``valid_until``, or a later one).
A fact found out later to have stopped holding earlier is left out.

*Record time* is what the team believed then: the memories as they were
after the last commit on the branch before that moment, read from git.
"""

from __future__ import annotations

from datetime import date, datetime, time, timezone

from .errors import InvalidInput
from .git import Git


def moment(value: object, now: datetime, first: datetime | None, where: str = "as_of") -> datetime:
    """The moment ``value`` names, in UTC, checked to lie between the first commit (``first``) and ``now``.

    ``value`` is a datetime (one without a time zone is taken as UTC), a date,
    or text: ``2026-03-01`` (the end of that day: what held once it was over;
    today means now) or an ISO-8601 time (``2026-03-01T09:30:00Z``).

    Raises:
        InvalidInput: not a time, in the future, or before the first commit (one line naming it).
    """
    when = _parsed(value, where)
    if isinstance(when, date) and not isinstance(when, datetime):
        end = datetime.combine(when, time(23, 59, 59), timezone.utc)
        when = now if when == now.date() else end
    elif when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    when = when.astimezone(timezone.utc).replace(microsecond=0)
    if when > now:
        raise InvalidInput(f"{where}: {_shown(value)} is in the future (now is {now:%Y-%m-%d %H:%M} UTC); "
                           "give a time that has passed")
    if first is None or when < first:
        since = f"its first commit is from {first:%Y-%m-%d %H:%M} UTC" if first else "it has no commit yet"
        raise InvalidInput(f"{where}: {_shown(value)} is before this memory repository existed ({since}); "
                           "give a later time")
    return when


def _parsed(value: object, where: str) -> date | datetime:
    if isinstance(value, (date, datetime)):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return date.fromisoformat(text) if len(text) == 10 else datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            pass
    raise InvalidInput(f"{where}: expected a date like 2026-03-01 or a time like 2026-03-01T09:30:00Z, "
                       f"got {_shown(value)}")


def _shown(value: object) -> str:
    return repr(value) if not isinstance(value, (date, datetime)) else value.isoformat()


def first_commit(git: Git, tip: str | None) -> datetime | None:
    """When the first commit of the branch at ``tip`` was made (None when there is none)."""
    if tip is None:
        return None
    stamps = [int(line) for line in git.run("log", "--max-parents=0", "--format=%ct", tip).stdout.split()
              if line.isdigit()]
    return datetime.fromtimestamp(min(stamps), timezone.utc) if stamps else None


def commit_at(git: Git, tip: str, when: datetime) -> str | None:
    """The last commit of the branch at ``tip`` (its first parents) made at ``when`` or before; None if none."""
    found = git.run("rev-list", "-1", "--first-parent", f"--before={int(when.timestamp())}", tip).stdout.strip()
    return found or None
