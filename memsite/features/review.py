"""What changed in memory between two revisions: the report a reviewer reads in a pull request.

Computed from the net difference of the two trees (so a squash-merged history
reads the same as the commits it squashed) and, for the why, from the commit
trailers in the range (``Memory-Id`` / ``Action`` / ``Reason``). One tree diff,
one batch of blob reads and one ``git log``, whatever the size of the range.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..foundation.config import Config, Place, load_config, memory_url, place_of, site_url
from ..foundation.errors import FormatError
from ..foundation.fileformat import decode, memory_fields, parse_memory
from ..foundation.likeness import flagged
from ..foundation.record import Memory, short_id
from ..foundation.text import similarity
from ..git import Git, Repository
from . import history, world

SHOWN_FIELDS = ("category", "abstract", "overview", "tags", "source", "pinned", "active_count")
REWORDED = 0.5  # word pairs in common below which an updated text says something else (both shown whole)


@dataclass
class Change:
    """One memory's change in the range."""

    # created | superseded | updated | merged | recalled | moved | forgotten | trimmed | deleted | transient
    action: str
    id: str
    category: str
    abstract: str
    agent: str
    path: str
    reason: str = ""
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # field -> (before, after)
    diff: str = ""  # unified diff of the text
    moved_from: str = ""  # the file it was in at the base, when it moved (memsite migrate, a category change)
    commits: tuple[str, ...] = ()  # transient: the commit that created it and the one that forgot or trimmed it
    texts: tuple[str, str] = ("", "")  # superseded, or updated to say something else: (old text, new text)
    superseded_by: str = ""  # superseded: the memory that replaced it
    new_abstract: str = ""  # superseded: that memory's abstract
    flags: tuple[str, ...] = ()  # created: ids it may contradict, for a person to confirm or dismiss


@dataclass
class Diff:
    """What changed in memory between two revisions (``store.diff``, ``memsite diff``): a pull request's review."""

    base: str
    head: str
    commits: int
    changes: list[Change] = field(default_factory=list)
    world: list[tuple[str, str, str]] = field(default_factory=list)  # (key, added|changed|removed, value)
    sessions_added: list[str] = field(default_factory=list)
    sessions_touched: list[tuple[str, str]] = field(default_factory=list)  # (path, modified|deleted)
    site_url: str = ""  # where the memory website is published (mkdocs.yml): memories link to their pages

    def count(self, action: str) -> int:
        """How many memories changed by ``action`` (``created``, ``forgotten``...)."""
        return sum(c.action == action for c in self.changes)

    def to_json(self) -> str:
        """The whole diff as indented JSON: its fields, each change with its fields."""
        return json.dumps(asdict(self), indent=2, ensure_ascii=False, default=str)


def compare(root: Path, base: str, head: str = "HEAD", *, strict: bool = True) -> Diff:
    """The changes to memory between ``base`` and ``head`` in the repository at ``root``.

    With ``strict=False`` a changed file that breaks the memory format is
    passed over (``memsite check`` reports it on its own line).

    Raises:
        RepositoryError: a revision names no commit.
        FormatError: a changed memory file cannot be read (file, field, fix).
    """
    config = load_config(root)
    repo = Repository(root)
    try:
        base_sha, head_sha = repo.resolve(base), repo.resolve(head)
        entries = [(path, before, after) for path, before, after in
                   repo.diff_trees(repo.root_tree(base_sha), repo.root_tree(head_sha))
                   if path.startswith(config.content_dir + "/")]
        blobs = repo.objects.read_blobs([e.sha for _, *pair in entries for e in pair if e is not None])
        trailers, log = _trailers(root, base_sha, head_sha, config.content_dir)
    finally:
        repo.close()
    report = Diff(base, head, len(log), site_url=site_url(root))
    before: dict[str, tuple[str, Memory]] = {}
    after: dict[str, tuple[str, Memory]] = {}
    for path, old, new in entries:
        if (place := _place(config, path)) is not None:
            for entry, side in ((old, before), (new, after)):
                if entry is None:
                    continue
                try:
                    memory = _memory(config, place, path, blobs[entry.sha])
                except FormatError:
                    if strict:
                        raise
                    continue
                side[memory.id] = (path, memory)
        elif path == config.world_path:
            report.world = _world_changes(blobs.get(old.sha) if old else None, blobs.get(new.sha) if new else None)
        elif path.startswith(config.sessions_dir + "/"):
            if old is None:
                report.sessions_added.append(path)
            else:
                report.sessions_touched.append((path, "deleted" if new is None else "modified"))
    for mid in sorted(set(before) | set(after)):
        report.changes.append(_change(config, mid, before.get(mid), after.get(mid), trailers.get(mid, [])))
    report.changes = _supersessions(report.changes, before, after)
    report.changes += _transient(root, config, log, set(before) | set(after))
    order = {"superseded": 0, "created": 1, "merged": 2, "updated": 3, "forgotten": 4, "trimmed": 5, "transient": 6,
             "deleted": 7, "recalled": 8, "moved": 9}
    report.changes.sort(key=lambda c: (order[c.action], c.category, c.abstract))
    return report


def _place(config: Config, path: str) -> Place | None:
    """Where the memory file ``path`` is under memories/ or archive/ (either layout); None if it is none."""
    for folder in (config.memories_dir, config.archive_dir):
        if path.startswith(folder + "/"):
            return place_of(path[len(folder) + 1:])
    return None


def _memory(config: Config, place: Place, path: str, data: bytes) -> Memory:
    category = config.by_folder(place.folder)
    name = category.name if category else place.folder
    return parse_memory(decode(data, path), path, category=name).replace(path=Path(path))


def _change(config: Config, mid: str, old: tuple[str, Memory] | None, new: tuple[str, Memory] | None,
            records: list[tuple[str, str, str]]) -> Change:
    actions = [action for action, _, _ in records]
    reasons = [reason for _, reason, _ in records if reason]
    archive = f"{config.content_dir}/archive/"
    if old is None or (old[0].startswith(archive) and new is not None and not new[0].startswith(archive)):
        path, memory = new  # type: ignore[misc]  # new is there when old is not
        return Change("created", mid, memory.category, memory.abstract, memory.agent, path,
                      flags=tuple(flagged(memory)))
    if new is None or (new[0].startswith(archive) and not old[0].startswith(archive)):
        path, memory = old
        action = ("trimmed" if "trimmed" in actions or new is not None else
                  "forgotten" if "forgotten" in actions else "deleted")
        return Change(action, mid, memory.category, memory.abstract, records[-1][2] if records else "", path,
                      reason="; ".join(reasons))
    (old_path, was), (path, now) = old, new
    fields = {name: (memory_fields(was).get(name), memory_fields(now).get(name)) for name in SHOWN_FIELDS}
    fields = {name: pair for name, pair in fields.items() if pair[0] != pair[1]}
    moved_from = old_path if old_path != path else ""
    if "migrated" in actions and not reasons:
        reasons = ["memsite migrate"]
    actions = [action for action in actions if action != "migrated"]  # a move says nothing of the content
    action = "merged" if "merged" in actions else "updated"
    if not actions and set(fields) <= {"active_count"} and was.content == now.content:
        action = "moved" if moved_from and not fields else "recalled"
    if set(actions) == {"recalled"}:
        action = "recalled"
    diff, texts = "", ("", "")
    if was.content != now.content and similarity(was.content, now.content) < REWORDED:
        texts = (was.content, now.content)  # it says something else now: the two texts side by side
    elif was.content != now.content:
        diff = "\n".join(difflib.unified_diff(was.content.splitlines(), now.content.splitlines(), "before", "after",
                                              n=1, lineterm=""))
    return Change(action, mid, now.category, now.abstract, records[-1][2] if records else now.agent, path,
                  reason="; ".join(reasons), fields=fields, diff=diff, moved_from=moved_from, texts=texts)


def _supersessions(changes: list[Change], before: dict[str, tuple[str, Memory]],
                   after: dict[str, tuple[str, Memory]]) -> list[Change]:
    """Each memory superseded in the range as one change naming its successor, with both texts; the
    successor's own change (created, or updated to name it) is folded into it."""
    folded: set[str] = set()
    by_id = {c.id: c for c in changes}
    for change in changes:
        now = after.get(change.id)
        was = before.get(change.id)
        if now is None or now[1].superseded_by is None or (was is not None and was[1].superseded_by is not None):
            continue
        old, successor = now[1], after.get(now[1].superseded_by)
        new_text = successor[1].content if successor else ""
        change.action, change.superseded_by = "superseded", now[1].superseded_by
        change.reason = change.reason.removeprefix(f"by {old.superseded_by}").removeprefix(": ")
        change.new_abstract = successor[1].abstract if successor else ""
        change.texts = ((was[1] if was else old).content, new_text)
        change.fields = {name: pair for name, pair in change.fields.items() if name != "active_count"}
        change.diff = ""
        if successor is not None:
            follower = by_id.get(successor[1].id)
            if follower is not None and follower.action in ("created", "updated") and follower.id not in folded:
                folded.add(follower.id)
                change.category = f"{old.category} → {successor[1].category}" if old.category != \
                    successor[1].category else old.category
    return [c for c in changes if c.id not in folded]


def _world_changes(old: bytes | None, new: bytes | None) -> list[tuple[str, str, str]]:
    _, was = world.parse(old.decode("utf-8", "replace")) if old else ("", {})
    _, now = world.parse(new.decode("utf-8", "replace")) if new else ("", {})
    changes = [(k, "added", now[k]) for k in now if k not in was]
    changes += [(k, "changed", now[k]) for k in now if k in was and was[k] != now[k]]
    changes += [(k, "removed", was[k]) for k in was if k not in now]
    return sorted(changes)


def _trailers(root: Path, base: str, head: str,
              folder: str) -> tuple[dict[str, list[tuple[str, str, str]]], list[history.Commit]]:
    """Memory id -> [(action, reason, author)] from the commit trailers in base..head, oldest first; the commits."""
    commits = history.read(root, f"{base}..{head}", folder)
    found: dict[str, list[tuple[str, str, str]]] = {}
    for commit in commits:
        for mid, action, reason in commit.actions:
            found.setdefault(mid, []).append((action, reason, commit.author))
    return found, commits


def _transient(root: Path, config: Config, commits: list[history.Commit], seen: set[str]) -> list[Change]:
    """Memories created and then forgotten or trimmed inside the range: the net tree diff cannot show them.

    Each is read back from the commit that created it (one ``git cat-file --batch`` for all of them).
    """
    created: dict[str, history.Commit] = {}
    gone: dict[str, tuple[history.Commit, str, str]] = {}
    for commit in commits:
        for mid, action, reason in commit.actions:
            if action == "created" and mid not in seen:
                created[mid] = commit
            elif action in ("forgotten", "trimmed") and mid in created:
                gone[mid] = (commit, action, reason)
    wanted = [(mid, f"{created[mid].sha}:{path}", path) for mid in gone for status, path in created[mid].files
              if status == "A" and _place(config, path) is not None]
    if not wanted:
        return []
    names = sorted({spec for _, spec, _ in wanted})
    blobs = {name: found[1] for name, found in zip(names, Git(root).cat_file(names))
             if found is not None and found[0] == "blob"}
    changes = []
    for mid, spec, path in wanted:
        try:
            memory = _memory(config, _place(config, path), path, blobs.get(spec, b""))  # type: ignore[arg-type]  # wanted holds memory files only
        except FormatError:
            continue
        if memory.id != mid:
            continue
        commit, action, reason = gone[mid]
        changes.append(Change("transient", mid, memory.category, memory.abstract, memory.agent, path,
                              reason=f"{action}" + (f": {reason}" if reason else ""),
                              commits=(created[mid].sha, commit.sha)))
    return changes


def ids_used_before(root: Path, base: str, folder: str) -> set[str]:
    """Every memory id named in a commit trailer up to ``base`` (one pass over that history)."""
    return {mid for commit in history.read(root, base, folder) for mid, _, _ in commit.actions}


_SPECIAL = re.compile(r"([\\`*_\[\]<>|#@!])")


def _plain(text: object) -> str:
    return " ".join(str(text if text is not None else "").split())


def _inert(text: object) -> str:
    """Agent text as one line of inert Markdown (no links, images, mentions or HTML)."""
    return _SPECIAL.sub(r"\\\1", " ".join(str(text if text is not None else "").split()))


TEXT_SHOWN = 600  # characters of each text shown side by side


def _side_by_side(texts: tuple[str, str], names: tuple[str, str], md: Any, terminal: bool) -> list[str]:
    """The old and the new text of a fact that changed: a two-column table, or two lines in a terminal."""
    old, new = (md(text[:TEXT_SHOWN] + ("…" if len(text) > TEXT_SHOWN else "")) for text in texts)
    if terminal:
        return [f"  {names[0]}: {old}", f"  {names[1]}: {new}"]
    return ["", f"  | {names[0]} | {names[1]} |", "  |---|---|", f"  | {_cell(old)} | {_cell(new)} |", ""]


def _cell(text: str) -> str:
    return text or "_(gone)_"  # (agent text is escaped already: a '|' cannot end the cell)


def _value(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(str, value)) + "]"
    return "none" if value is None or value == "" else str(value)


def markdown(report: Diff, limit: int = 200, *, terminal: bool = False) -> str:
    """The report for a pull request: totals and highlights first, then each kind of change.

    ``terminal=True`` leaves agent text as it is (no Markdown escapes) for a
    person reading it in a terminal; the caller escapes control characters.
    """
    _md = _plain if terminal else _inert

    def named(c: Change) -> str:  # the id, linking to the memory's page while it exists and the site is published
        if report.site_url and not terminal and c.action in ("created", "merged", "updated", "recalled", "moved"):
            return f"[`{short_id(c.id)}`]({memory_url(report.site_url, c.id)})"
        return f"`{short_id(c.id)}`"

    agents = Counter(c.agent for c in report.changes if c.action not in ("recalled", "moved"))
    categories = Counter(c.category for c in report.changes if c.action not in ("recalled", "moved"))
    totals = [f"{report.count(a)} {a}" for a in ("superseded", "created", "updated", "merged", "forgotten", "trimmed",
                                                  "deleted", "moved") if report.count(a)]
    if report.count("transient"):
        totals.append(f"{report.count('transient')} created then forgotten")
    lines = [f"# Memory changes {_md(report.base)}..{_md(report.head)}", "",
             f"**{', '.join(totals) or 'no memory changed'}**; {len(report.world)} world-state keys changed, "
             f"{len(report.sessions_added)} sessions added, {report.commits} commits.", ""]
    if report.count("recalled"):
        lines += [f"Recall counts changed on {report.count('recalled')} memories.", ""]
    problems = [c for c in report.changes if c.action == "deleted"] or report.sessions_touched
    if problems:
        lines += ["> **Needs attention:** " + "; ".join(
            [f"{_md(c.path)} deleted without a forget or trim record" for c in report.changes
             if c.action == "deleted"] + [f"session {_md(p)} {how}" for p, how in report.sessions_touched]), ""]
    review = [c for c in report.changes if c.flags]
    if review:
        lines += ["## To review: possible contradictions", "",
                  "Written without a language model to judge them: each may replace a memory that no longer "
                  "holds. Confirm with `memsite supersede OLD NEW`, or `memsite dismiss NEW OLD` when both hold.", ""]
        lines += [f"- {named(c)} **{_md(c.category)}**: {_md(c.abstract)} _({_md(c.agent)})_ may replace "
                  + ", ".join(f"`{short_id(old)}`" for old in c.flags) for c in review[:limit]]
        lines.append("")
    created = [c for c in report.changes if c.action == "created"]
    if created:
        lines += ["## Highlights", ""]
        lines += [f"- **{_md(c.category)}**: {_md(c.abstract)} _({_md(c.agent)})_"
                  + (f" ({named(c)})" if report.site_url and not terminal else "") for c in created[:10]]
        lines.append("")
    sections = (("superseded", "Facts that changed"), ("created", "Created"), ("merged", "Merged"),
                ("updated", "Updated"), ("forgotten", "Forgotten"),
                ("trimmed", "Trimmed"), ("transient", "Created then forgotten"),
                ("deleted", "Deleted without a record"),
                ("moved", "Moved to another file, unchanged"))
    for action, title in sections:
        members = [c for c in report.changes if c.action == action]
        if not members:
            continue
        lines += [f"## {title} ({len(members)})", ""]
        for c in members[:limit]:
            if c.action == "superseded":
                lines.append(f"- superseded {named(c)} by `{short_id(c.superseded_by)}` **{_md(c.category)}**: "
                             f"{_md(c.abstract)} → {_md(c.new_abstract)} _({_md(c.agent)})_"
                             + (f" — {_md(c.reason)}" if c.reason else ""))
                lines += _side_by_side(c.texts, ("was", "now"), _md, terminal)
                continue
            lines.append(f"- {named(c)} **{_md(c.category)}**: {_md(c.abstract)} _({_md(c.agent)})_"
                         + (f" — {_md(c.reason)}" if c.reason else "")
                         + (f" (created in {c.commits[0][:10]}, removed in {c.commits[1][:10]})" if c.commits else ""))
            for name, (was, now) in c.fields.items():
                lines.append(f"  - {name}: {_md(_value(was))} → {_md(_value(now))}")
            if c.moved_from:
                lines.append(f"  - file: {_md(c.moved_from)} → {_md(c.path)}")
            if c.diff:
                lines += ["", "  ```diff", *[f"  {line.rstrip()}" for line in c.diff.splitlines()], "  ```", ""]
            if any(c.texts):
                lines += _side_by_side(c.texts, ("before", "after"), _md, terminal)
        if len(members) > limit:
            lines.append(f"- … and {len(members) - limit} more (see `memsite diff --json`)")
        lines.append("")
    if report.world:
        lines += ["## World state", "", "| key | change | value |", "|---|---|---|"]
        lines += [f"| `{k}` | {how} | {_md(v)[:200]} |" for k, how, v in report.world]  # keys: no backticks
        lines.append("")
    if report.sessions_added:
        lines += ["## Sessions added", ""] + [f"- `{Path(p).stem}`" for p in report.sessions_added] + [""]
    if agents:
        lines += ["## By agent and category", "", "| agent | changes |", "|---|---:|"]
        lines += [f"| {_md(a)} | {n} |" for a, n in agents.most_common()]
        lines += ["", "| category | changes |", "|---|---:|"]
        lines += [f"| {_md(c)} | {n} |" for c, n in categories.most_common()]
        lines.append("")
    return "\n".join(lines)
