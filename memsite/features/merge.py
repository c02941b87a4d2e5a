"""memsite's git merge drivers: what they are called, and how each merges.

git needs two things per driver: ``.gitattributes`` naming it for some paths
(committed; ``memsite init`` writes it) and a ``merge.<name>.driver`` command in
each clone's own config (git never takes that from the repository). Every
store registers the commands when it opens, so a fresh clone is ready before
its first merge. GitHub's merge button runs no custom driver: merge or rebase
locally (``memsite sync``) so it has nothing left to merge.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..foundation.errors import FormatError
from ..foundation.fileformat import format_memory, parse_memory
from ..git import merge_file
from . import world

if TYPE_CHECKING:
    from ..git import Repository


@dataclass(frozen=True)
class Driver:
    name: str  # merge.<name>.driver in git config
    kind: str  # the argument of 'memsite merge-driver'
    description: str


WORLD = Driver("memsite-world", "world", "memsite: merge world state key by key")
MEMORY = Driver("memsite-memory", "memory", "memsite: merge memory files, recall counts adding up")
DRIVERS = (WORLD, MEMORY)
SHARED_INDEX_EXPIRE = "1.hour.ago"  # splitIndex.sharedIndexExpire in memsite's clones (git's default: 2.weeks.ago)


def command(driver: Driver) -> str:
    """The command git runs: this Python, so the driver works without memsite on PATH."""
    return f"{shlex.quote(sys.executable)} -m memsite merge-driver {driver.kind} %O %A %B %P"


def gitattributes(content_dir: str) -> list[str]:
    """The ``.gitattributes`` lines that route files to the drivers."""
    return [
        "# memsite merge drivers; each clone registers the commands itself (git keeps them per clone)",
        f"/{content_dir}/world_state.md merge={WORLD.name}",
        f"/{content_dir}/memories/**/*.md merge={MEMORY.name}",
        f"/{content_dir}/archive/**/*.md merge={MEMORY.name}",
    ]


def run(kind: str, base: Path, ours: Path, theirs: Path, label: str = "") -> int:
    """Merge ``theirs`` into ``ours`` in place (git's %A), given ``base``.

    Returns:
        0 when the merge is clean, 1 when a conflict was written into ``ours``.
    """
    if kind not in (WORLD.kind, MEMORY.kind):
        raise ValueError(f"unknown merge driver {kind!r}")
    texts = [path.read_bytes().decode("utf-8", "surrogateescape") for path in (base, ours, theirs)]
    where = f" in {label}" if label else ""
    try:
        if kind == WORLD.kind:
            merged, conflicts = world.three_way(*texts)
            problem = f"world state keys changed on both sides{where}: {', '.join(conflicts)}" if conflicts else ""
        else:
            merged, clash = merge_memory(*texts, label=label or "memory")
            problem = f"both sides changed the same lines of the memory text{where}" if clash else ""
    except FormatError:
        # Not a file memsite can read (yet): merge it as git would.
        _, clean = merge_file(ours, base, theirs)
        return 0 if clean else 1
    ours.write_bytes(merged.encode("utf-8", "surrogateescape"))
    if problem:
        print(f"memsite: {problem}", file=sys.stderr)
        return 1
    return 0


def merge_memory(base: str, ours: str, theirs: str, *, label: str = "memory") -> tuple[str, bool]:
    """Merge three versions of one memory file.

    ``active_count`` adds up (base + both sides' recalls), ``updated`` and
    ``last_recalled`` take the later time, ``tags`` the union, and the text a
    line-based 3-way merge. Any other field (a supersession's ``superseded_by``
    and ``valid_until`` too) changed on one side takes that side; changed on
    both, the side updated later. Returns (text, whether the
    text merge left conflict markers).

    Raises:
        FormatError: a version is not a memory file, or the ids differ.
    """
    b = parse_memory(base, f"{label} (base)") if base.strip() else None
    o = parse_memory(ours, f"{label} (ours)")
    t = parse_memory(theirs, f"{label} (theirs)")
    if o.id != t.id or (b is not None and b.id != o.id):
        raise FormatError(f"{label}: the two sides are different memories ({o.id}, {t.id})")
    later, earlier = (t, o) if t.updated > o.updated else (o, t)

    def pick(name: str) -> Any:
        ov, tv = getattr(o, name), getattr(t, name)
        bv = getattr(b, name) if b is not None else None
        if ov == tv or tv == bv:
            return ov
        if ov == bv:
            return tv
        return getattr(later, name)

    extra: dict[str, Any] = {}
    for key in dict.fromkeys([*o.extra, *t.extra]):
        ov, tv, bv = o.extra.get(key), t.extra.get(key), (b.extra.get(key) if b else None)
        value = ov if ov == tv or tv == bv else tv if ov == bv else later.extra.get(key, earlier.extra.get(key))
        if value is not None:
            extra[key] = value
    content, clash = _merge_text(b.content if b else "", o.content, t.content)
    base_count = b.active_count if b is not None else 0
    recalled = [x for x in (o.last_recalled, t.last_recalled) if x is not None]
    merged = o.replace(
        category=pick("category"), abstract=pick("abstract"), overview=pick("overview"), agent=pick("agent"),
        source=pick("source"), pinned=pick("pinned"), created=min(o.created, t.created),
        updated=max(o.updated, t.updated), last_recalled=max(recalled) if recalled else None,
        active_count=base_count + (o.active_count - base_count) + (t.active_count - base_count),
        tags=tuple(dict.fromkeys(o.tags + t.tags)), extra=extra, content=content,
        supersedes=pick("supersedes"), superseded_by=pick("superseded_by"), valid_until=pick("valid_until"),
    )
    return format_memory(merged), clash


def _merge_text(base: str, ours: str, theirs: str) -> tuple[str, bool]:
    if ours == theirs or theirs == base:
        return ours, False
    if ours == base:
        return theirs, False
    with tempfile.TemporaryDirectory(prefix="memsite-merge-") as tmp:
        paths = []
        for name, text in (("ours", ours), ("base", base), ("theirs", theirs)):
            path = Path(tmp, name)
            path.write_text(text + "\n", encoding="utf-8", errors="surrogateescape")
            paths.append(path)
        merged, clean = merge_file(*paths, in_place=False)
    return merged.decode("utf-8", "surrogateescape").rstrip("\n"), not clean


def clone_settings(repo: Repository) -> dict[tuple[str, str | None, str], str]:
    """The git config every clone of a memory repository needs (git never shares it).

    Besides the merge drivers and a split index: loose objects stored
    uncompressed, unless the user chose a compression at any level. A hand
    commit rewrites a whole category folder, and reading it back to update the
    index is then a copy rather than an inflate (docs/benchmarks.md).
    ``git gc`` still packs them compressed. Shared index files git no longer
    reads expire after an hour rather than git's two weeks, unless the user
    chose: each fold of the split index writes the whole index again, and a
    team writing 100,000 memories a month folds 500 times (2.5 GB kept).
    """
    settings: dict[tuple[str, str | None, str], str] = {("core", None, "splitIndex"): "true"}
    if not repo.configured("splitIndex", "sharedIndexExpire"):
        settings[("splitIndex", None, "sharedIndexExpire")] = SHARED_INDEX_EXPIRE
    if not repo.configured("core", "compression") and not repo.configured("core", "looseCompression"):
        settings[("core", None, "looseCompression")] = "0"
    for driver in DRIVERS:
        settings[("merge", driver.name, "name")] = driver.description
        settings[("merge", driver.name, "driver")] = command(driver)
    return settings
