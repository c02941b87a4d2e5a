"""The memory's history, from one pass of ``git log``: daily reports and each memory's changes.

Everything comes from what is committed (commit trailers and the files each
commit touched), so a report is the same at any clone and reproducible at any
revision: ``memsite report --date D`` at a tag shows that tag's history.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from ..foundation.errors import RepositoryError
from ..git import Git

COUNTED = ("created", "merged", "updated", "forgotten", "trimmed", "recalled")
_SEP, _END = "\x1f", "\x1e"


@dataclass(frozen=True)
class Commit:
    sha: str
    author: str
    when: datetime
    subject: str
    actions: tuple[tuple[str, str, str], ...]  # (memory id, action, reason)
    skipped: int
    files: tuple[tuple[str, str], ...]  # (status, path)
    recalls: tuple[tuple[str, int], ...] = ()  # (memory id, recalls added), from 'Recalls: +N' trailers
    categories: tuple[tuple[str, str], ...] = ()  # (memory id, category), from 'Category:' trailers
    purged: str | None = None  # a purge's tombstone: why (its 'Reason:'); never what


@dataclass
class DayReport:
    """One day of the history (``store.reports``, ``memsite report``): what was written, and by whom."""

    day: date
    commits: int = 0
    sessions: list[str] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)  # created / merged / skipped / trimmed / ...
    highlights: list[str] = field(default_factory=list)  # ids of what was created
    agents: dict[str, Counter] = field(default_factory=dict)
    abstracts: dict[str, str] = field(default_factory=dict)  # highlight id -> its abstract, while it is in memory

    def as_dict(self) -> dict[str, Any]:
        """The report as plain data for JSON: ``day`` (ISO), ``commits``, ``sessions``, ``counts``,
        ``created`` (the highlights' ids) and ``agents`` (agent -> counts)."""
        return {"day": self.day.isoformat(), "commits": self.commits, "sessions": self.sessions,
                "counts": dict(self.counts), "created": self.highlights,
                "agents": {agent: dict(counts) for agent, counts in self.agents.items()}}


def read(root: Path, revision: str = "HEAD", folder: str = "content") -> list[Commit]:
    """Every commit reachable from ``revision`` that touched ``folder``, oldest first (one ``git log``)."""
    result = Git(root).run("log", "--reverse", "--no-renames", "--name-status", "-z",
                           f"--format={_END}%H{_SEP}%an{_SEP}%at{_SEP}%B{_SEP}", revision, "--", folder)
    if result.returncode != 0:
        if any(m in result.stderr for m in ("does not have any commits", "unknown revision", "not a git repository")):
            return []  # no history to read: the site shows none
        raise RepositoryError(f"git log failed in {root}: {result.stderr.strip()}")
    return [c for c in (_commit(record) for record in result.stdout.split(_END)[1:]) if c is not None]


def removal(root: Path, tip: str, mid: str) -> tuple[str, str, datetime, str, str, str] | None:
    """The newest commit up to ``tip`` that forgot or trimmed the memory ``mid`` (or one whose id starts or ends
    with it, in any case): (commit id, author, when, the memory's id, forgotten or trimmed, the reason), or None.

    ``git log`` greps the commit messages newest first, in git's own code, and
    is stopped at the first one that removed it: a memory forgotten lately is
    found at once, and an id never used costs one pass over the messages.
    """
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", mid):
        return None
    records = Git(root).log(tip, "-E", "-i", "--all-match", f"--grep=^Memory-Id: ({mid}|[A-Za-z0-9_-]*{mid}$)",
                            "--grep=^Action: (forgotten|trimmed)$",
                            f"--format=%H{_SEP}%an{_SEP}%at{_SEP}%B{_SEP}{_END}",
                            sep=_END.encode())  # (a record is whole at its end mark)
    for record in records:  # (leaving the loop ends git)
        commit = _commit(record.decode("utf-8", "replace").lstrip("\n"))
        if commit is None:
            continue
        for found, action, reason in commit.actions:  # the trailers say which it removed
            if action in ("forgotten", "trimmed") and (found.lower().startswith(mid.lower())
                                                        or found.lower().endswith(mid.lower())):
                return commit.sha, commit.author, commit.when, found, action, reason
    return None


def world_conflicts(root: Path, revision: str = "HEAD") -> list[tuple[str, datetime, str]]:
    """The world keys a merge found set two ways, newest first: (merge commit, when, what was kept over what),
    from the ``World-Conflict`` trailers of the merges ``memsite sync`` and ``integrate`` make (one ``git log``)."""
    records = Git(root).log(revision, "--merges", "--grep=^World-Conflict: ",
                            f"--format=%H{_SEP}%at{_SEP}%(trailers:key=World-Conflict,valueonly,separator=%x1d){_END}",
                            sep=_END.encode())
    found = []
    for record in records:
        sha, _, rest = record.decode("utf-8", "replace").strip("\n").partition(_SEP)
        stamp, _, listed = rest.partition(_SEP)
        if not stamp.isdigit():
            continue  # (what follows the last record)
        when = datetime.fromtimestamp(int(stamp), tz=UTC)
        found += [(sha, when, line.strip()) for line in listed.split("\x1d") if line.strip()]
    return found


def _commit(record: str) -> Commit | None:
    parts = record.split(_SEP)
    if len(parts) < 5:
        return None
    sha, author, stamp, message, rest = parts[0], parts[1], parts[2], parts[3], _SEP.join(parts[4:])
    actions: list[list[str]] = []
    current: list[str] | None = None
    recalls: list[tuple[str, int]] = []
    categories: list[tuple[str, str]] = []
    purged: str | None = None
    for line in message.splitlines():
        key, _, value = line.strip().partition(": ")
        if key == "Memory-Id":
            current = [value.strip(), "", ""]
            actions.append(current)
        elif current is not None and key == "Action":
            current[1] = value.strip()
        elif current is not None and key == "Category":
            categories.append((current[0], value.strip()))
        elif current is not None and key == "Reason":
            current[2] = value.strip()
        elif current is None and key == "Action" and value.strip() == "purged":
            purged = ""
        elif current is None and key == "Reason" and purged is not None:
            purged = value.strip()
        elif current is not None and key == "Recalls" and value.strip().lstrip("+").isdigit():
            recalls.append((current[0], int(value.strip().lstrip("+"))))
    skipped = sum(int(n) for n in re.findall(r"^Skipped: (\d+)$", message, re.MULTILINE))
    fields = [f for f in rest.strip("\0\n").split("\0") if f]
    files = tuple((fields[i].strip(), fields[i + 1]) for i in range(0, len(fields) - 1, 2))
    return Commit(sha, author, datetime.fromtimestamp(int(stamp), tz=UTC),
                  message.split("\n", 1)[0], tuple((a[0], a[1], a[2]) for a in actions), skipped, files, tuple(recalls),
                  tuple(categories), purged)


def daily(commits: list[Commit], sessions_dir: str = "content/sessions") -> list[DayReport]:
    """One report per day with commits, newest first."""
    days: dict[date, DayReport] = {}
    for commit in commits:
        report = days.setdefault(commit.when.date(), DayReport(commit.when.date()))
        report.commits += 1
        agent = report.agents.setdefault(commit.author, Counter())
        for status, path in commit.files:
            if status == "A" and path.startswith(sessions_dir + "/"):
                report.sessions.append(Path(path).stem)
                agent["sessions"] += 1
        for mid, action, _ in commit.actions:
            if action in COUNTED:
                report.counts[action] += 1
                agent[action] += 1
            if action == "created":
                report.highlights.append(mid)
        if commit.skipped:
            report.counts["skipped"] += commit.skipped
            agent["skipped"] += commit.skipped
    return sorted(days.values(), key=lambda r: r.day, reverse=True)


def by_memory(commits: list[Commit], ids_by_path: dict[str, str],
              only: Collection[str] | None = None) -> dict[str, list[tuple[Commit, str]]]:
    """Memory id -> [(commit, action)], newest first: trailers name the memory; a hand edit, its file.

    ``ids_by_path`` names the files memories are in now; a file that moved
    (``memsite migrate``, a category change) keeps its name, so its earlier
    path is followed back through the commits that moved it. ``only``: the
    memories whose changes are wanted (None: all).
    """
    if only is not None:
        ids_by_path = {path: mid for path, mid in ids_by_path.items() if mid in only}
    ids_by_path = dict(ids_by_path)
    for commit in reversed(commits):  # newest first: a chain of moves leads back to the first path
        if not any(status == "D" for status, _ in commit.files):
            continue  # (moved nothing)
        added = {path.rpartition("/")[2]: path for status, path in commit.files if status == "A"}
        for status, path in commit.files:
            mid = ids_by_path.get(added.get(path.rpartition("/")[2], "")) if status == "D" else None
            if mid is not None:
                ids_by_path.setdefault(path, mid)
    found: dict[str, list[tuple[Commit, str]]] = {}
    for commit in commits:
        named = {mid for mid, _, _ in commit.actions}
        for mid, action, _ in commit.actions:
            if only is None or mid in only:
                found.setdefault(mid, []).append((commit, action or "changed"))
        for status, path in commit.files:
            mid = ids_by_path.get(path)
            if mid is not None and mid not in named:
                found.setdefault(mid, []).append((commit, "edited by hand" if status == "M" else
                                                  "added by hand" if status == "A" else "changed"))
    return {mid: entries[::-1] for mid, entries in found.items()}


def render_day(report: DayReport, abstract: Callable[[str], str], esc: Callable[[object], str],
               session: Callable[[str], str] | None = None) -> str:
    """A day's report as Markdown: counts, sessions (``session`` renders a name, a link say), highlights, per agent."""
    show = session or esc
    memories = ", ".join(f"{report.counts.get(k, 0)} {k}" for k in ("created", "merged", "skipped", "trimmed"))
    extra = ", ".join(f"{n} {k}" for k, n in sorted(report.counts.items())
                      if k not in ("created", "merged", "skipped", "trimmed", "recalled") and n)
    recalled = report.counts.get("recalled", 0)
    lines = [f"# Report {report.day.isoformat()}", "",
             f"- Memories: {memories}" + (f", {extra}" if extra else ""),
             f"- Recall counts recorded for {recalled} {'memory' if recalled == 1 else 'memories'}",
             f"- Sessions closed: {len(report.sessions)}", f"- Commits: {report.commits}", "",
             "## Highlights", ""]
    lines += [f"- {abstract(mid)}" for mid in report.highlights[:20]] or ["(nothing created)"]
    if len(report.highlights) > 20:
        lines.append(f"- … and {len(report.highlights) - 20} more")
    lines += ["", "## Sessions", ""]
    lines += [f"- {show(name)}" for name in report.sessions] or ["(none)"]
    lines += ["", "## By agent", "", "| Agent | Created | Merged | Skipped | Trimmed | Sessions |",
              "|---|---:|---:|---:|---:|---:|"]
    for agent, c in sorted(report.agents.items()):
        lines.append(f"| {esc(agent)} | {c['created']} | {c['merged']} | {c['skipped']} | {c['trimmed']} | "
                     f"{c['sessions']} |")
    return "\n".join(lines) + "\n"


def removals(commits: list[Commit], keep: set[str]) -> list[tuple[date, date, str]]:
    """(day created, day removed, category) of each memory the history created and then forgot or trimmed.

    ``keep``: ids that exist now (a memory forgotten and then written again is not gone).
    """
    created: dict[str, tuple[date, str]] = {}
    gone: dict[str, date] = {}
    for commit in commits:
        categories = dict(commit.categories)
        for mid, action, _ in commit.actions:
            if action == "created":
                created[mid] = (commit.when.date(), categories.get(mid, ""))
                gone.pop(mid, None)
            elif action in ("forgotten", "trimmed"):
                gone[mid] = commit.when.date()
    return [(created[mid][0], day, created[mid][1]) for mid, day in gone.items() if mid in created and mid not in keep]



def read_files(root: Path, specs: list[str]) -> list[bytes | None]:
    """The bytes of each ``<commit>:<path>`` in ``specs`` (None where it names no file), from one ``git cat-file``."""
    if not specs:
        return []
    answers = Git(root).cat_file(specs)
    return [answer[1] if answer is not None and answer[0] == "blob" else None for answer in answers]  # missing, a tree


def removed_files(commits: list[Commit], folder: str) -> list[tuple[Commit, str]]:
    """(commit, path) of every file under ``folder`` a commit that forgot or trimmed a memory deleted."""
    return [(c, path) for c in commits if any(a in ("forgotten", "trimmed") for _, a, _ in c.actions)
            for status, path in c.files if status == "D" and path.startswith(folder + "/")]
