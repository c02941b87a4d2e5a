"""Every page of the memory site, rendered from a snapshot as Markdown (src_uri -> text).

Page structure (headings, sections) is Markdown; anything that came from an
agent goes into raw HTML blocks, escaped with :func:`safe.text` or rendered by
:func:`safe.body`, so Markdown never interprets it. The URLs are a contract:

``/`` the home page: this week first, then the dashboard · ``/m/<id>/`` each
memory in full (:mod:`memory_pages`; the address depends on the id alone) ·
``/memories/<category>/`` best ranked first and ``/memories/<category>/<YYYY-MM>/``
the memories created that month (``page-<n>/`` after the first 200 of either) ·
``/rankings/`` · ``/weeks/`` and ``/weeks/<YYYY>-W<ww>/`` · ``/days/`` and
``/days/<date>/`` · ``/skills/`` · ``/world/`` · ``/sessions/`` and
``/sessions/<name>/`` · ``/agents/`` and ``/agents/<agent>/``.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

from ..features import history
from ..features.history import Commit
from ..features.protocol import learning_memory
from ..features.sessions import SessionRecord
from ..features.skills import SkillCandidate, promote
from ..foundation.config import Category
from ..foundation.decay import TrimCandidate, plan_trim
from ..foundation.likeness import flagged
from ..foundation.record import Memory
from . import charts, lists, safe, weeks
from .lists import ANY_PAGE, UP, ListPages, Lists, memories_of
from .logs import LogPages
from .memory_pages import SHELL_SRC, Article, shell_page, title
from .parsed import Entries
from .safe import link, text
from .snapshot import Scored, Snapshot
from .summaries import Day, category_projection, daily_summary, days
from .weeks import Digest

FADING = 20
LATEST = 12  # changes on the dashboard
SHOWN_NEW = 10  # new memories of a category named in a digest
SHOWN_REMOVED = 30  # forgotten or trimmed memories named in a digest


class Site(LogPages, ListPages):
    """Renders the pages of one snapshot."""

    def __init__(self, snap: Snapshot, site_name: str = "Agent memory", commits: list[Commit] | None = None,
                 repo_url: str | None = None, *, gone: dict[str, Memory] | None = None,
                 world_at: dict[str, dict[str, str]] | None = None,
                 world_conflicts: list[tuple[str, datetime, str]] | None = None,
                 entries: Entries | None = None) -> None:
        self.snap = snap
        self.kept_entries = entries  # the entries an earlier build made (None: every entry is made)
        self.commits = commits or []
        self.site_name = site_name
        self.repo_url = (repo_url or "").rstrip("/")  # links to commits and file histories go there when set
        self.file_of = {mid: path for path, mid in snap.paths.items()}
        self.folders = {c.name: c.folder for c in snap.config.categories}
        self.session_names = {s.name for s in snap.sessions}
        self.skills: list[SkillCandidate] = promote(s.memory for s in snap.current)
        self.gone = gone or {}  # memories forgotten or trimmed, as they were: named by their abstract
        self.world_at = world_at or {}
        self.by_id = {s.memory.id: s for s in snap.memories}
        self.agents = set(snap.agents())
        self._up: dict[tuple[str, str], str] = {(ANY_PAGE, "m"): UP}  # (page, folder) -> its link to /folder/
        self._entries: dict[str, str] = {}  # memory id -> its entry in a list, the link to /m/ left as UP
        self.world_conflicts = world_conflicts or []
        self.chunks: list[str] = []  # finished HTML the pages refer to by placeholder
        self.list_pages: dict[str, tuple[str, str]] = {}  # the later pages of long lists: src -> (title, HTML)

    def raw(self, html: str) -> str:
        """A placeholder for finished HTML, put in place after Markdown ran (see MemsitePlugin.on_page_content).

        Python-Markdown would leave the HTML alone anyway, but parsing it to
        find that out is most of the cost of a big page.
        """
        self.chunks.append(html)
        return f"\n{placeholder(len(self.chunks) - 1)}\n"

    # --- helpers ------------------------------------------------------------

    def folder(self, here: str, folder: str) -> str:
        """The way from the page ``here`` to the site's ``folder``/ (``m``, ``agents``), worked out once per page:
        links to memories and agents are most of a long page's links."""
        up = self._up.get((here, folder))
        if up is None:
            up = self._up[(here, folder)] = safe.href(here, f"{folder}/index.md")
        return up

    def memory_link(self, here: str, memory: Memory) -> str:
        """A link to the memory's page."""
        return f'<a href="{self.folder(here, "m")}{text(memory.id)}/">{text(title(memory))}</a>'

    def named(self, here: str, mid: str) -> str:
        """A memory by its abstract: linked while it is in memory, struck through with its category once gone."""
        scored = self.by_id.get(mid)
        if scored is not None:
            return self.memory_link(here, scored.memory)
        gone = self.gone.get(mid)
        if gone is not None:
            return (f'<span class="memsite-gone">{text(title(gone))}</span> '
                    f'<span class="memsite-meta">({text(gone.category)}, no longer in memory)</span>')
        return f'a memory <code title="{text(mid)}">{text(mid[:10])}…</code> no longer in memory'

    def meta(self, scored: Scored, here: str = "index.md", score: str | None = None) -> str:
        """A memory's score, agent, dates, recalls, pin, supersession and tags (``score``: shown in place of the
        score)."""
        m = scored.memory
        parts = [f"score {score or f'{scored.score:.3f}'}", text(m.agent), f"created {m.created:%Y-%m-%d}",
                 f"updated {m.updated:%Y-%m-%d}", f"recalled {safe.plural(m.active_count, 'time')}"]
        if m.pinned:
            parts.append("pinned")
        if m.valid_until is not None and m.valid_until <= self.snap.now:
            successor = self.by_id.get(m.superseded_by or "")
            parts.append(f'<span class="memsite-superseded">superseded on {m.valid_until:%Y-%m-%d}</span>'
                         + (f" by {self.memory_link(here, successor.memory)}" if successor else ""))
        if m.tags:
            parts.append("tags: " + ", ".join(f'<span class="memsite-tag">{text(t)}</span>' for t in m.tags))
        return '<p class="memsite-meta">' + " · ".join(parts) + "</p>"

    def commit_link(self, here: str, commit: Commit) -> str:
        """A commit: on the hosted repository when ``repo_url`` is set, else the page of its day."""
        label = f"<code>{commit.sha[:10]}</code>"
        if self.repo_url:
            return f'<a href="{text(self.repo_url)}/commit/{commit.sha}">{label}</a>'
        return f'<a href="{safe.href(here, f"days/{commit.when:%Y-%m-%d}.md")}">{label}</a>'

    def agent_link(self, here: str, agent: str) -> str:
        """An agent's name, linking to its page when it has one (a commit's author may be a person or memsite)."""
        return f'<a href="{self.folder(here, "agents")}{text(agent)}/">{text(agent)}</a>' if agent in self.agents \
            else text(agent)

    def session_link(self, here: str, session: SessionRecord) -> str:
        return link(here, f"sessions/{session.name}.md", f"{session.finished:%Y-%m-%d} {session.type}: "
                    + (", ".join(session.keywords) or session.name))

    def rows(self, here: str, members: Iterable[Scored], start: int = 1, why: bool = False) -> str:
        """A ranking table: rank, the memory (with its category and score parts), score.

        ``why``: say, for a profile or preference fact, why it fades like the rest.
        """
        out = ['<div class="memsite-rank"><table>',
               '<thead><tr><th class="memsite-num">#</th><th>Memory</th><th class="memsite-num">Score</th></tr>'
               "</thead><tbody>"]
        for n, s in enumerate(members, start=start):
            m = s.memory
            note = " · pinned" if m.pinned else ""
            if why and m.category in EVERGREEN:
                note += " · fades only because it is not pinned"
            out.append(f'<tr><td class="memsite-num">{n}</td><td>{self.memory_link(here, m)}<br>'
                       f'<span class="memsite-meta">{text(m.category)} · decay {s.decay:.3f} × boost {s.boost:.3f}'
                       f"{note}</span></td>"
                       f'<td class="memsite-num">{s.score:.3f}</td></tr>')
        out.append("</tbody></table></div>")
        return self.raw("\n".join(out))

    # --- pages --------------------------------------------------------------

    def pages(self, listed: Callable[[], Lists] | None = None) -> dict[str, str]:
        """Every page MkDocs renders: src_uri -> Markdown (memory pages come from :meth:`articles`; the later
        pages of long lists go to :attr:`list_pages`). ``listed``: what :meth:`lists` returns, made elsewhere."""
        pages = {"index.md": self.home(), "rankings.md": self.rankings(), "skills.md": self.skills_page(),
                 "world.md": self.world(), "memories/index.md": self.categories(), SHELL_SRC: shell_page()}
        pages.update(self.week_pages())
        pages.update(self.day_pages())
        pages.update(self.session_pages())
        pages.update(self.agent_pages())
        for src, (title_, content, number) in (listed or self.lists)().items():
            if number == 1:
                pages[src] = f"{safe.front(title_)}# {safe.inline(title_)}\n\n{self.raw(content)}\n"
            else:
                self.list_pages[src] = (title_, content)
        pages.update(lists.shells(self.list_pages))
        return pages

    # What only some pages need, worked out when first asked for: the pages of lists and the page keys are made
    # by a process beside this one (generate.Beside) while this one makes the others.

    @functools.cached_property
    def history(self) -> dict[str, list[tuple[Commit, str]]]:
        """Memory id -> its changes, newest first (``history.by_memory``)."""
        return history.by_memory(self.commits, self.snap.paths)

    @functools.cached_property
    def days(self) -> list[Day]:
        """The daily summaries (:func:`summary_days`)."""
        return summary_days(self.snap, self.commits)

    @functools.cached_property
    def timeline(self) -> weeks.Timeline:
        """Memories, sessions and commits by day, for digests."""
        return weeks.Timeline(self.snap, self.commits, self.skills, self.world_at, self.world_conflicts)

    @functools.cached_property
    def article(self) -> Article:
        """What renders each memory's article (and says what it depends on: :meth:`Article.key`)."""
        return Article(self.folders, self.session_names, self.history, self.file_of, self.repo_url, self.by_id,
                       self.snap.config.half_life_days, self.snap.origins)

    def article_keys(self) -> dict[str, str]:
        """Memory id -> the key of its article (:meth:`Article.key`): what a build compares with the last one's."""
        return {s.memory.id: self.article.key(s) for s in self.snap.memories}

    def articles(self, part: int = 0, parts: int = 1, skip: Collection[str] = ()) -> Iterator[tuple[str, str, str]]:
        """(id, page title, article HTML) of every memory not in ``skip`` (or of share ``part`` of ``parts``
        of them): ``/m/<id>/``."""
        todo = [s for s in self.snap.memories if s.memory.id not in skip] if skip else self.snap.memories
        if skip and "history" not in self.__dict__:  # the changes of these alone (not all, when few are written)
            self.history = history.by_memory(self.commits, self.snap.paths, {s.memory.id for s in todo})
        for scored in todo[part::parts]:
            m = scored.memory
            yield m.id, f"{title(m)} · {m.category}", self.article.render(scored)

    def home(self) -> str:
        """The home page: the last days first (what the agents learned, changed, forgot, who did what,
        open tasks), then the dashboard: counts, charts, latest changes, what fades, top ranked."""
        here, snap = "index.md", self.snap
        grouped = self.snap.by_category()
        created = Counter(s.memory.created.date() for s in snap.current)
        running, points = 0, []
        for day in sorted(created):
            running += created[day]
            points.append((day, running))
        cards = [(len(snap.current), "memory", "memories", "memories/index.md"),
                 (len(grouped), "category", "categories", "memories/index.md"),
                 (len(snap.agents()), "agent", "agents", "agents/index.md"),
                 (len(snap.sessions), "session", "sessions", "sessions/index.md"),
                 (len(snap.tasks), "open task", "open tasks", "index.md#open-tasks"),
                 (len(self.skills), "skill draft to review", "skill drafts to review", "skills.md")]
        days = snap.config.recent_days
        recent = self.digest(snap.now - timedelta(days=days), snap.now + timedelta(seconds=1))
        lines = [
            safe.front(None), f"# {safe.inline(self.site_name)}", "",
            f"What the agents have learned, as of {snap.now:%Y-%m-%d %H:%M} UTC.", "",
            f"## The last {days} days" if days != 7 else "## This week", "",
            self.digest_body(here, recent, open_tasks=True), "",
            "## At a glance", "",
            '<div class="memsite-cards">' + "".join(
                f'<a class="memsite-card" href="{_card_href(here, target)}"><strong>{n}</strong> '
                f"{one if n == 1 else many}</a>" for n, one, many, target in cards) + "</div>", "",
            "## Latest changes", "", self.latest_changes(here), "",
            "## Fading soon", "", self.fading_soon(here), "",
            "## Memories by category", "",
            self.raw(charts.bars([(name, len(members)) for name, members in grouped.items()],
                                 "Memories by category")), "",
            "## Memories over time", "",
            self.raw(charts.timeline(points, "Memories over time (total)")), "",
            "## Top-ranked memories", "",
            self.rows(here, snap.current[:10]) if snap.current else "No memories yet.", "",
            "## Recent sessions", "",
        ]
        lines += [f"- {self.session_link(here, s)} — {self.agent_link(here, s.agent)}, {text(s.outcome)}"
                  for s in snap.sessions[:10]]
        if not snap.sessions:
            lines.append("No sessions yet.")
        return "\n".join(lines) + "\n"

    def digest(self, start: datetime, end: datetime) -> Digest:
        return self.timeline.digest(start, end)

    def digest_body(self, here: str, d: Digest, *, open_tasks: bool = False) -> str:
        """A digest as the sections of a page: learned, world state, forgotten, who did what (and open tasks)."""
        lines = []
        if d.empty:
            last = max((c.when for c in self.commits), default=None)
            lines += ["Nothing was written in these days."
                      + (f" The last change was on {last:%Y-%m-%d}: see "
                         f"{link(here, f'weeks/{weeks.iso_week(last.date())}.md', 'that week')}." if last else ""), ""]
        else:
            counts = [memories_of(len(d.new), "new "),
                      safe.plural(len(d.sessions), "task") + " closed",
                      f"{len(d.removed)} forgotten or trimmed", safe.plural(d.commits, "commit")]
            last = d.end - timedelta(seconds=1)
            lines += [f"{d.start:%Y-%m-%d} to {last:%Y-%m-%d}: " + ", ".join(counts) + ".", ""]
            lines += ["### What was learned", "", self.raw(self.learned(here, d)), ""]
            if d.changed:
                lines += ["### Facts that changed", "", self.raw(self.facts_changed(here, d)), ""]
            if d.review:
                lines += ["### To review", "", self.raw(self.to_review(here, d)), ""]
            lines += ["### World state", "", self.raw(self.world_changes(here, d)), ""]
            lines += ["### Forgotten or trimmed", "", self.raw(self.removed(here, d)), ""]
            lines += ["### Who did what", "", self.raw(self.who(here, d)), ""]
        if open_tasks:
            lines += ["### Open tasks", "", self.open_tasks(here), ""]
        return "\n".join(lines)

    def learned(self, here: str, d: Digest) -> str:
        out = []
        grouped = d.by_category()
        if grouped:
            out.append("<p><strong>New memories</strong> by category:</p><ul>")
            for category in [c.name for c in self.snap.config.categories] + sorted(set(grouped) - set(self.folders)):
                members = grouped.get(category)
                if not members:
                    continue
                folder = self.folders.get(category, category)
                more = len(members) - SHOWN_NEW
                out.append(f"<li>{link(here, f'memories/{folder}/index.md', category)} ({len(members)}): <ul>"
                           + "".join(f"<li>{self.memory_link(here, s.memory)}</li>" for s in members[:SHOWN_NEW])
                           + (f"<li>and {more} more: "
                              f"{link(here, f'memories/{folder}/{members[0].memory.created:%Y-%m}.md', 'the month')}"
                              "</li>" if more > 0 else "") + "</ul></li>")
            out.append("</ul>")
        else:
            out.append("<p>No new memories.</p>")
        taught = [(s, x) for s in d.sessions for x in s.learnings]
        if taught:
            made = {(s.memory.source, s.memory.content.strip()): s.memory for s in self.snap.memories
                    if s.memory.source in {x.name for x, _ in taught}}
            out.append("<p><strong>Task learnings</strong>:</p><ul>")
            for session, learning in taught[:SHOWN_REMOVED]:
                memory = made.get((session.name, learning_memory(learning)[0]))
                shown = self.memory_link(here, memory) if memory else text(learning)
                out.append(f"<li>{shown} — {self.session_link(here, session)}, "
                           f"{self.agent_link(here, session.agent)}</li>")
            out.append("</ul>")
        if d.skills:
            out.append("<p><strong>Skill drafts</strong> to review: " + ", ".join(
                link(here, "skills.md", c.name, _anchor(c.name)) for c in d.skills) + ".</p>")
        return "".join(out)

    def facts_changed(self, here: str, d: Digest) -> str:
        """Each memory superseded in the digest's days: what it said, what replaced it, when and by whom."""
        items = []
        for old, new in d.changed[:SHOWN_REMOVED]:
            replaced = (f"replaced by {self.memory_link(here, new)} on {old.valid_until:%Y-%m-%d} by "
                        f"{self.agent_link(here, new.agent)}" if new is not None
                        else f"replaced on {old.valid_until:%Y-%m-%d}")
            items.append(f"<li>{self.memory_link(here, old)} ({text(old.category)}, written {old.created:%Y-%m-%d} by "
                         f"{self.agent_link(here, old.agent)}) → {replaced}</li>")
        more = f"<li>and {len(d.changed) - SHOWN_REMOVED} more</li>" if len(d.changed) > SHOWN_REMOVED else ""
        return '<ul class="memsite-changed">' + "".join(items) + more + "</ul>"

    def to_review(self, here: str, d: Digest) -> str:
        """New memories flagged as possibly contradicting another, with the commands that settle each."""
        items = []
        for scored in d.review[:SHOWN_REMOVED]:
            new = scored.memory
            for old_id in flagged(new):
                items.append(f"<li>{self.memory_link(here, new)} may replace {self.named(here, old_id)}: confirm with "
                             f"<code>memsite supersede {text(old_id)} {text(new.id)}</code>, or "
                             f"<code>memsite dismiss {text(new.id)} {text(old_id)}</code> if both hold</li>")
        return ("<p>Possible contradictions, written without a language model to judge them:</p>"
                '<ul class="memsite-review">' + "".join(items) + "</ul>")

    def world_changes(self, here: str, d: Digest) -> str:
        both = "".join(f"<li>{text(line.replace(': kept ', ' was set two ways: kept ', 1))} (merge "
                       f"{text(sha[:12])}, {when:%Y-%m-%d %H:%M})</li>" for sha, when, line in d.conflicts)
        both = f"<p><strong>Set two ways</strong>, for review (the value written last was kept):</p><ul>{both}</ul>" \
            if both else ""
        if not d.world:
            return "<p>No change to the world state.</p>" + both
        rows = "".join(f'<tr><td class="memsite-key">{_key(k)}</td><td class="memsite-num">{text(action)}</td>'
                       f"<td>{text(safe.short(safe.plain(v), 200))}</td></tr>" for k, action, v in d.world[:50])
        more = f"<p>and {len(d.world) - 50} more keys.</p>" if len(d.world) > 50 else ""
        return (f'<div class="memsite-world"><table><thead><tr><th>Key</th><th>Change</th><th>Value</th></tr>'
                f"</thead><tbody>{rows}</tbody></table></div>{more}{both}")

    def removed(self, here: str, d: Digest) -> str:
        if not d.removed:
            return "<p>Nothing was forgotten or trimmed.</p>"
        items = [f"<li>{self.named(here, mid)}: {text(action)} by {self.agent_link(here, c.author)} on "
                 f"{c.when:%Y-%m-%d}" + (f", because {text(safe.short(reason, 300))}" if reason else "")
                 + f" ({self.commit_link(here, c)})</li>" for c, mid, action, reason in d.removed[:SHOWN_REMOVED]]
        more = (f"<li>and {len(d.removed) - SHOWN_REMOVED} more: see the day pages</li>"
                if len(d.removed) > SHOWN_REMOVED else "")
        return "<ul>" + "".join(items) + more + "</ul>"

    def who(self, here: str, d: Digest) -> str:
        if not d.agents:
            return "<p>No agent wrote anything.</p>"
        head = "".join(f'<th class="memsite-num">{h}</th>' for h in
                       ("New", "Merged", "Updated", "Forgotten", "Trimmed", "Recalls", "Tasks"))
        rows = "".join(f"<tr><td>{self.agent_link(here, agent)}</td>" + "".join(
            f'<td class="memsite-num">{c[k]}</td>' for k in (*weeks.AGENT_COLUMNS, "recalls", "sessions")) + "</tr>"
            for agent, c in sorted(d.agents.items()))
        return (f'<div class="memsite-who"><table><thead><tr><th>Agent</th>{head}</tr></thead>'
                f'<tbody>{rows}</tbody></table></div>')

    def latest_changes(self, here: str) -> str:
        """The newest commits that changed memories: when, who, what, and the commit."""
        sessions = self.snap.config.sessions_dir + "/"
        items = []
        for commit in reversed(self.commits):
            if commit.purged is not None:  # a tombstone: why, never what
                items.append(f"<li>{commit.when:%Y-%m-%d %H:%M} {self.agent_link(here, commit.author)}: "
                             f"purged: {text(commit.purged)} ({self.commit_link(here, commit)})</li>")
                if len(items) == LATEST:
                    break
                continue
            changed = [(mid, action) for mid, action, _ in commit.actions if action != "recalled"]
            closed = [Path(path).stem for status, path in commit.files
                      if status == "A" and path.startswith(sessions) and Path(path).stem in self.session_names]
            if not changed and not closed:
                continue  # recall counts are no news
            parts = [f"{text(action or 'changed')} {self.named(here, mid)}" for mid, action in changed[:3]]
            if len(changed) > 3:
                parts.append(f"and {len(changed) - 3} more")
            parts += [f"closed {link(here, f'sessions/{name}.md', name)}" for name in closed]
            what = "; ".join(parts)
            items.append(f"<li>{commit.when:%Y-%m-%d %H:%M} {self.agent_link(here, commit.author)}: {what} "
                         f"({self.commit_link(here, commit)})</li>")
            if len(items) == LATEST:
                break
        if not items:
            return "No changes recorded yet." if self.commits else "No history: the site was built outside git."
        return self.raw('<ul class="memsite-changes">' + "".join(items) + "</ul>")

    def open_tasks(self, here: str) -> str:
        """Every agent's task in progress, with its plan."""
        if not self.snap.tasks:
            return "No task in progress."
        out = []
        for agent, t in sorted(self.snap.tasks.items()):
            done = sum(item.done for item in t.todo)
            plan = "".join(f"<li>{'☑' if item.done else '☐'} {text(item.text)}"
                           + (f" — {text(item.note)}" if item.note else "") + "</li>" for item in t.todo)
            out.append(f"<li>{self.agent_link(here, agent)}: {text(t.type)}: {text(', '.join(t.keywords))} "
                       f"(started {t.started:%Y-%m-%d %H:%M}, {done} of {len(t.todo)} steps done)"
                       + (f"<ul>{plan}</ul>" if plan else "") + "</li>")
        return self.raw('<ul id="open-tasks">' + "".join(out) + "</ul>")

    def fading_soon(self, here: str) -> str:
        """The memories the next write would trim, per category with a capacity, said plainly."""
        at_risk = self.trim_forecast()
        if not at_risk:
            return ("No category has a capacity: nothing is ever trimmed. "
                    f"See {link(here, 'rankings.md', 'the rankings', 'fading-from-recall')} "
                    "for what recall finds last.")
        out = []
        for category, fill, ids in at_risk:
            members = [s for s in self.snap.by_category()[category.name] if s.memory.id in ids]
            name = link(here, f"memories/{category.folder}/index.md", category.name)
            if members:
                out.append(f"<li>{name} holds {fill}: the next memory written there trims "
                           + (f"these {len(members)}, lowest ranked first: " if len(members) > 1 else "")
                           + ", ".join(self.memory_link(here, s.memory) for s in members) + "</li>")
            else:
                out.append(f"<li>{name} holds {fill}: the next memory written there trims nothing.</li>")
        return self.raw("<ul>" + "".join(out) + "</ul>")

    def trim_forecast(self) -> list[tuple[Category, str, list[str]]]:
        """(category, how full it is, ids the next write to it would trim) for each capped category."""
        config, grouped, result = self.snap.config, self.snap.by_category(), []
        for category in config.categories:
            if not category.capacity.bounded:
                continue
            members = [TrimCandidate(s.memory.id, s.memory.created, s.memory.active_count, s.memory.pinned,
                                     s.memory.lines) for s in grouped.get(category.name, [])]
            # One more memory, kept (as a new one is): what would the write that adds it trim?
            newcomer = TrimCandidate("", self.snap.now, 0, True, 1)
            ids = plan_trim([*members, newcomer], category.capacity, self.snap.now + timedelta(seconds=1),
                            config.half_life_days, config.active_weight)
            fill = []
            if category.capacity.entries is not None:
                fill.append(f"{len(members)} of at most {category.capacity.entries.high} memories")
            if category.capacity.lines is not None:
                fill.append(f"{sum(m.lines for m in members)} of at most {category.capacity.lines.high} lines")
            result.append((category, " and ".join(fill), ids))
        return result

    def categories(self) -> str:
        here = "memories/index.md"
        lines = [safe.front("Memories"), "# Memories", "", "| Category | Memories | What it holds |", "|---|---:|---|"]
        grouped = self.snap.by_category()
        for category in self.snap.config.categories:
            target = f"memories/{category.folder}/index.md"
            lines.append(f"| {link(here, target, category.name)} | {len(grouped.get(category.name, []))} | "
                         f"{safe.inline(category.description)} |")
        return "\n".join(lines) + "\n"

    def rankings(self) -> str:
        here, snap, config = "rankings.md", self.snap, self.snap.config
        capped = {c.name for c in config.categories if c.capacity.bounded}
        fading = sorted((s for s in snap.current if not s.memory.pinned and s.memory.category not in capped
                         and s.memory.category not in EVERGREEN), key=lambda s: (s.score, s.memory.id))
        evergreen = [c for c in config.categories if c.name in EVERGREEN]
        lines = [
            safe.front("Rankings"), "# Rankings", "",
            "Every memory fades unless it keeps being recalled:", "",
            '<pre class="memsite-formula"><code>score = decay × boost\n'
            f"decay = 2^(−age_days / {config.half_life_days:g})\n"
            f"boost = 1 + {config.active_weight:g} × ln(1 + recalls)</code></pre>", "",
            f"Decay has a half-life of {config.half_life_days:g} days: a memory loses half its score every "
            f"{config.half_life_days:g} days; pinned memories do not decay.", "",
            "## Overall", "", self.rows(here, snap.current[:50], why=True) if snap.current else "No memories yet.",
            "",
            "## Will be trimmed", "",
            "Categories with a capacity keep their best-ranked memories: the write that takes one past its "
            "high mark trims the lowest-ranked down to the low mark (archived, and kept in git history).", "",
        ]
        forecast = self.trim_forecast()
        for category, fill, ids in forecast:
            members = [s for s in snap.by_category()[category.name] if s.memory.id in ids]
            lines += [f"### {safe.inline(category.name)}: {safe.inline(fill)}", ""]
            lines += [self.rows(here, members) if members else "The next write to it trims nothing.", ""]
        if not forecast:
            lines += ["No category has a capacity, so nothing is ever trimmed.", ""]
        lines += [
            "## Fading from recall", "",
            "The lowest scores in categories without a capacity: they stay in memory, "
            "but recall ranks them last.", "",
        ]
        if evergreen:
            names = " and ".join(c.name for c in evergreen)
            lines += [f"{safe.inline(names)} memories are not listed: who the user is and how they like things "
                      "done does not get less true with age. Recall still ranks them by the same formula; pin one "
                      "to keep it at full score, or forget it when it stops being true.", ""]
        lines += [self.rows(here, fading[:FADING]) if fading else "Nothing is fading.", ""]
        for name, members in snap.by_category().items():
            if members:
                lines += [f"## {safe.inline(name)}", "", self.rows(here, members[:10], why=True), ""]
        return "\n".join(lines)

    def skills_page(self) -> str:
        here = "skills.md"
        lines = [safe.front("Skill drafts"), "# Skill drafts", "",
                 "Patterns recalled often enough to become agent skills, awaiting review. "
                 "`memsite skills --write DIR` writes each as a SKILL.md draft.", ""]
        for c in self.skills:
            pattern = self.by_id[c.source_pattern_id].memory
            lines += [self.raw(
                f'<section class="memsite-skill" data-pagefind-body data-pagefind-meta="category:skill draft">'
                f'<h2 id="{_anchor(c.name)}" data-pagefind-meta="title">{text(c.name)}</h2>'
                f"<p>{text(c.description)}</p>"
                f'<p class="memsite-meta" data-pagefind-ignore>confidence {c.confidence:.0%} · recalled {c.recalls}x · '
                f"{c.analysis} analysis · source pattern {self.memory_link(here, pattern)}</p>"
                "<p><strong>When to use</strong></p><ul>" + "".join(f"<li>{text(t)}</li>" for t in c.triggers)
                + "</ul><p><strong>Steps</strong></p><ol>" + "".join(f"<li>{text(s)}</li>" for s in c.steps)
                + "</ol></section>"), ""]
        if not self.skills:
            lines.append("No pattern has been recalled often enough yet.")
        return "\n".join(lines) + "\n"

    def world(self) -> str:
        lines = [safe.front("World state"), "# World state", ""]
        preamble = self.snap.world_preamble.strip()
        if preamble.startswith("# "):  # the file's own title: the page has one
            preamble = preamble.partition("\n")[2].strip()
        if preamble:
            lines += [f'<div class="memsite-body">{safe.body(preamble)}</div>', ""]
        else:
            lines += ["Shared facts every agent reads at the start of a task, merged key by key.", ""]
        if self.snap.world:
            lines.append('<div data-pagefind-body data-pagefind-meta="category:world state">'
                         '<h2 hidden data-pagefind-meta="title">World state</h2>'
                         '<div class="memsite-world"><table><thead><tr><th>Key</th><th>Value</th></tr></thead><tbody>'
                         + "".join(f'<tr><td class="memsite-key" id="{text(k)}">{_key(k)}</td>'
                                   f"<td>{safe.body(v)}</td></tr>" for k, v in sorted(self.snap.world.items()))
                         + "</tbody></table></div></div>")
        else:
            lines.append("No world state yet.")
        return "\n".join(lines) + "\n"


EVERGREEN = ("profile", "preferences")  # facts about the user: not listed as fading (see Site.rankings)


def summary_days(snap: Snapshot, commits: list[Commit]) -> list[Day]:
    """The daily summaries of ``snap``, each day as it stood at its end according to the history."""
    return days(snap, [(c.when.date(), mid, n) for c in commits for mid, n in c.recalls],
                history.removals(commits, {s.memory.id for s in snap.memories}))


def projection(snap: Snapshot, *, include_l1: bool = True, commits: list[Commit] | None = None) -> dict[str, str]:
    """``memsite project``: by-category/<category>.md and summaries/<date>.md, plain Markdown."""
    plain = lambda value: " ".join(str(value or "").split())  # noqa: E731 (a one-line helper)
    files = {}
    grouped = snap.by_category()
    for category in snap.config.categories:
        files[f"by-category/{category.name}.md"] = category_projection(
            category.name, category.description, grouped.get(category.name, []), plain, include_l1=include_l1,
            updated=f"{snap.now:%Y-%m-%dT%H:%M:%SZ}")
    for day in summary_days(snap, commits or []):
        files[f"summaries/{day.day.isoformat()}.md"] = daily_summary(snap, day, plain,
                                                                     lambda s: plain(s.memory.abstract))
    return files


def placeholder(number: int) -> str:
    return f"<!--memsite-html {number}-->"


def _key(key: str) -> str:
    """A world-state key that a narrow column breaks after a dot or underscore, never inside a word."""
    return "<code>" + text(key).replace(".", ".<wbr>").replace("_", "_<wbr>") + "</code>"


def _anchor(name: str) -> str:
    return text("skill-" + "".join(ch if ch.isalnum() or ch == "-" else "-" for ch in name.lower()))


def _card_href(here: str, target: str) -> str:
    page, _, anchor = target.partition("#")
    return safe.href(here, page, anchor or None)
