"""World state: one shared file of keyed sections, merged key by key.

``world_state.md`` looks like this::

    # World state

    Shared facts every agent sees; one section per key, kept sorted.

    ## ci.status

    green

    ## deploy.target

    staging

Everything before the first ``## `` line is the preamble. Keys are kept
sorted, new keys go in sorted position and every body has a blank line on
each side, so two branches that touched different keys merge line by line
without conflict. Here: parsing, rendering and the keyed 3-way merge, all pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..foundation import inputs
from ..foundation.errors import FormatError, InvalidInput

if TYPE_CHECKING:
    from ..storage import Storage, Transaction

KEY_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/@+-]{0,99}$")
DEFAULT_PREAMBLE = (
    "# World state\n\n"
    "Shared facts every agent sees: one section per key, kept sorted. Agents update it\n"
    "through memsite (store.world.merge); a key they were not told about is never dropped."
)
_HEADING = re.compile(r"^## (.*)$")
CONFLICT_MARKERS = ("<<<<<<< ", ">>>>>>> ")  # '=======' alone is also a Markdown underline
# A value may not hold a line git (or a person) would take for a conflict marker:
# once committed, every later merge of the file would stop at it.
_MARKER_LINE = re.compile(r"^(<{7}|={7}|>{7}|\|{7})")


def parse(text: str, where: str = "world_state.md") -> tuple[str, dict[str, str]]:
    """(preamble, key -> body) of a world state file.

    Raises:
        FormatError: a key is used twice or is not a valid key.
    """
    preamble: list[str] = []
    sections: dict[str, list[str]] = {}
    current: list[str] = preamble
    for number, line in enumerate(text.replace("\r\n", "\n").split("\n"), start=1):
        match = _HEADING.match(line)
        if match:
            key = match.group(1).strip()
            if not KEY_RE.match(key):
                raise FormatError(f"{where}: line {number}: '{key}' is not a valid key; "
                                  "use letters, digits and . _ - : / @ + (no spaces)")
            if key in sections:
                raise FormatError(f"{where}: line {number}: key '{key}' appears twice; merge the two sections")
            current = sections[key] = []
        else:
            current.append(line)
    return "\n".join(preamble).strip(), {key: "\n".join(body).strip() for key, body in sections.items()}


def render(preamble: str, values: Mapping[str, str]) -> str:
    """The canonical file: preamble, then each key in sorted order, blank lines around bodies."""
    parts = [(preamble.strip() or DEFAULT_PREAMBLE) + "\n"]
    for key in sorted(values):
        body = values[key].strip()
        parts.append(f"## {key}\n\n{body}\n" if body else f"## {key}\n")
    return "\n".join(parts)


def check_updates(updates: object, where: str) -> Mapping[object, object]:
    """``updates`` if it is a mapping (None counts as empty)."""
    if updates is None:
        return {}
    if not isinstance(updates, Mapping):
        raise InvalidInput(f"{where}: expected a mapping of key -> value, got {type(updates).__name__}")
    return updates


def check_remove(remove: object, where: str) -> list[object]:
    """``remove`` as a list of keys; a single key given as text counts as one."""
    if isinstance(remove, str):
        return [remove]
    if not isinstance(remove, Iterable) or isinstance(remove, (bytes, Mapping)):
        raise InvalidInput(f"{where}: remove expects a list of keys, got {type(remove).__name__}")
    return list(remove)


def check_value(key: object, value: object, max_bytes: int) -> tuple[str, str]:
    """A checked (key, body) pair for a merge; numbers and booleans become text.

    Args:
        max_bytes: the world cap (``max_world_bytes``): no value may pass it alone.
    """
    if not isinstance(key, str) or not KEY_RE.match(key):
        raise InvalidInput(f"world key {key!r}: use 1-100 letters, digits and . _ - : / @ + (no spaces)")
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, (int, float)):
        value = str(value)
    body = inputs.text(value, f"world value for '{key}'", max_bytes=max_bytes, allow_empty=True,
                       setting="max_world_bytes", fix="keep large text in a memory and refer to it").strip()
    for number, line in enumerate(body.split("\n"), start=1):
        if line.startswith("## "):
            raise InvalidInput(f"world value for '{key}' line {number}: starts with '## ', which begins a new "
                               "key; use '### ' for a heading inside a value")
        if _MARKER_LINE.match(line):
            raise InvalidInput(f"world value for '{key}' line {number}: starts with {line[:7]!r}, which git takes "
                               "for a merge conflict marker and which would stop every later merge; "
                               "indent the line or use fewer than 7 of these characters")
    inputs.no_secrets({f"world value for '{key}'": body})
    return key, body


def merged(current: Mapping[str, str], updates: Mapping[str, str], remove: Iterable[str]) -> dict[str, str]:
    """``current`` with ``updates`` applied and the keys in ``remove`` dropped.

    Raises:
        InvalidInput: the same key both set and removed.
    """
    removing = set(remove)
    both = removing & set(updates)
    if both:
        raise InvalidInput(f"world keys {', '.join(sorted(both))}: both set and removed in one merge; pick one")
    result = {key: body for key, body in current.items() if key not in removing}
    result.update(updates)
    return result


def render_checked(preamble: str, values: Mapping[str, str], max_bytes: int | None = None,
                   before: int = 0) -> str:
    """:func:`render`, refusing output that would not read back as exactly these keys.

    The file's one invariant is that no key disappears unless it was named;
    reading the rendered text back is the check that holds whatever the values.

    Args:
        max_bytes: the world cap (``max_world_bytes``); a file over it is
            refused unless it is no larger than it was (``before`` bytes), so
            a file already over a lowered cap can still shrink.
    """
    text = render(preamble, values)
    size = len(text.encode("utf-8"))
    if max_bytes is not None and size > max_bytes and size > before:
        raise InvalidInput(f"world state: would be {size} bytes, over the {max_bytes}-byte cap "
                           "(plugins.memsite.max_world_bytes); remove keys, keep large text in memories, "
                           "or raise the cap in mkdocs.yml")
    _, back = parse(text)
    if set(back) != set(values):
        missing = ", ".join(sorted(set(values) - set(back))) or "none"
        extra = ", ".join(sorted(set(back) - set(values))) or "none"
        raise InvalidInput(f"refusing a world state that would read back differently (lost: {missing}; new: {extra})")
    return text


def three_way(base: str, ours: str, theirs: str, *, labels: tuple[str, str] = ("ours", "theirs"),
              winners: Mapping[str, str] | None = None) -> tuple[str, list[str]]:
    """Merge three versions of the file key by key.

    A key changed (or added, or removed) on one side only takes that side; on
    both sides the same way, that value; on both sides differently, a
    conflict: the section holds git-style conflict markers, unless ``winners``
    names the side that keeps it (key -> ``ours`` or ``theirs``).

    Returns:
        (merged text, keys in conflict that ``winners`` did not settle)
    """
    base_pre, base_values = parse(base, "base")
    our_pre, our_values = parse(ours, "ours")
    their_pre, their_values = parse(theirs, "theirs")
    conflicts: list[str] = []

    def pick(b: str | None, o: str | None, t: str | None) -> tuple[str | None, bool]:
        if o == t:
            return o, False
        if o == b:
            return t, False
        if t == b:
            return o, False
        return None, True

    preamble, clash = pick(base_pre, our_pre, their_pre)
    if clash:
        preamble = our_pre  # prose only: keep ours rather than block the merge
    result: dict[str, str] = {}
    for key in sorted(set(base_values) | set(our_values) | set(their_values)):
        value, clash = pick(base_values.get(key), our_values.get(key), their_values.get(key))
        if clash and winners and key in winners:
            value, clash = (our_values if winners[key] == "ours" else their_values).get(key), False
        if clash:
            conflicts.append(key)
            result[key] = (f"<<<<<<< {labels[0]}\n{our_values.get(key, '(removed)')}\n=======\n"
                           f"{their_values.get(key, '(removed)')}\n>>>>>>> {labels[1]}")
        elif value is not None:
            result[key] = value
    return render(preamble or "", result), conflicts


@dataclass(frozen=True)
class Setting:
    """One side's value of a world key in a merge, and when and by whom it was written."""

    value: str | None  # None: the key was removed
    when: int  # commit time (seconds)
    agent: str

    def wins_over(self, other: Setting) -> bool:
        """Whether this one was written last: by commit time, then (a tie) by agent name, then by value."""
        return (self.when, self.agent, self.value or "") > (other.when, other.agent, other.value or "")

    def describe(self) -> str:
        shown = "(removed)" if self.value is None else " ".join(self.value.split())
        shown = shown if len(shown) <= 80 else shown[:79] + "…"
        at = datetime.fromtimestamp(self.when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"{shown!r} ({self.agent}, {at})"


CONFLICT_TRAILER = "World-Conflict"  # in a merge commit: a key both sides set, settled for the one written last


def conflict_trailer(key: str, kept: Setting, other: Setting) -> str:
    """The merge commit's trailer value that records a key set two ways: what was kept, what was not."""
    return f"{key}: kept {kept.describe()} over {other.describe()}"


def conflict_keys(base: str, ours: str, theirs: str) -> list[str]:
    """The keys both sides changed differently (what :func:`three_way` cannot merge alone)."""
    return three_way(base, ours, theirs)[1]


def conflict_lines(text: str) -> list[int]:
    """Line numbers holding conflict markers left from a merge."""
    return [n for n, line in enumerate(text.split("\n"), start=1) if line.startswith(CONFLICT_MARKERS)]


# --- the API over a store -------------------------------------------------------


def merge_in(tx: Transaction, updates: Mapping[str, str], remove: Iterable[str] = ()) -> bool:
    """Stage a read-merge-write of the world state in ``tx``; False if nothing changes.

    Reads the file as the transaction's base commit has it (the branch tip,
    under the lock), so concurrent writers never overwrite each other.

    Raises:
        FormatError: the file cannot be read safely (a key twice, conflict
            markers left from a merge); a merge never overwrites it blindly.
    """
    path = tx.store.config.world_path
    text = tx.read_text(path)
    preamble, current = parse(text, path) if text is not None else ("", {})
    leftovers = conflict_lines(text or "")
    if leftovers:
        raise FormatError(f"{path}: line {leftovers[0]} holds a merge conflict marker; resolve the conflict first")
    removing = [key for key in remove if key in current]
    result = merged(current, updates, removing)
    if result == current and text is not None:
        return False
    tx.write_text(path, render_checked(preamble, result, tx.store.config.max_world_bytes,
                                       len((text or "").encode("utf-8"))))
    tx.trailers += [("World-Set", key) for key in sorted(updates) if current.get(key) != updates[key]]
    tx.trailers += [("World-Unset", key) for key in sorted(removing)]
    return True


class World:
    """``store.world``: the shared world state of a memory repository."""

    def __init__(self, store: Storage) -> None:
        self._store = store

    @property
    def root(self) -> Path:
        """The repository's working tree."""
        return self._store.root

    def read(self, commit: str | None = None) -> dict[str, str]:
        """Every key and its Markdown body, at the branch tip (or at ``commit``)."""
        store = self._store
        with store.repo.thread_lock:
            data = store.repo.read_file(commit or store.tip(), store.config.world_path)
        if data is None:
            return {}
        return parse(data.decode("utf-8"), store.config.world_path)[1]

    def merge(self, updates: Mapping[str, object] | None = None, remove: Iterable[str] = ()) -> str | None:
        """Set the keys in ``updates``, remove the keys in ``remove``, keep every other key.

        Args:
            updates: key -> value (Markdown text; numbers and booleans become text).
            remove: keys to drop; keys that do not exist are ignored.

        Returns:
            The commit id, or None when nothing changed.

        Raises:
            InvalidInput: a bad key or value (nothing is written); SecretFound.
        """
        cap = self._store.config.max_world_bytes
        checked = dict(check_value(key, value, cap) for key, value in check_updates(updates, "world.merge").items())
        removing = [check_value(key, "", cap)[0] for key in check_remove(remove, "world.merge")]

        def body(tx: Transaction) -> bool:
            changed = merge_in(tx, checked, removing)
            # The subject names what changed: a key removed that was never there is not named.
            done = [(verb, [key for name, key in tx.trailers if name == trailer])
                    for verb, trailer in (("set", "World-Set"), ("unset", "World-Unset"))]
            tx.message = "World: " + "; ".join(f"{verb} {', '.join(keys)}" for verb, keys in done if keys)
            return changed

        tx, _ = self._store.write(body)
        return tx.commit
