"""Every page of the memory site, rendered from a snapshot as Markdown (src_uri -> text).

Page structure (headings, sections) is Markdown; anything that came from an
agent goes into raw HTML blocks, escaped with :func:`safe.text` or rendered by
:func:`safe.body`, so Markdown never interprets it. The URLs are a contract:

``/`` dashboard · ``/memories/<category>/`` (``page-<n>/`` after the first) ·
``/memories/<category>/<YYYY-MM>/#<id>`` each memory in full, a stable anchor
(the month it was created) · ``/rankings/`` · ``/summaries/`` and
``/summaries/<date>/`` · ``/skills/`` · ``/world/`` · ``/sessions/`` and
``/sessions/<name>/`` · ``/agents/`` and ``/agents/<agent>/``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path

from ..config import Category
from ..model import Memory
from ..ranking import TrimCandidate, plan_trim
from ..sessions import SessionRecord
from ..skills import SkillCandidate, promote
from .. import history
from ..history import Commit
from . import charts, safe
from .safe import link, text
from .logs import LogPages
from .snapshot import Scored, Snapshot
from .summaries import Day, category_projection, daily_summary, days

PER_PAGE = 50
FADING = 20
LATEST = 12  # changes on the dashboard


def memory_src(memory: Memory, folder: str) -> str:
    """The page holding ``memory`` in full: its category folder and the month it was created."""
    return f"memories/{folder}/{memory.created:%Y-%m}.md"


class Site(LogPages):
    """Renders the pages of one snapshot."""

    def __init__(self, snap: Snapshot, site_name: str = "Agent memory", commits: list[Commit] | None = None,
                 repo_url: str | None = None) -> None:
        self.snap = snap
        self.commits = commits or []
        self.history = history.by_memory(self.commits, snap.paths)
        self.site_name = site_name
        self.repo_url = (repo_url or "").rstrip("/")  # links to commits and file histories go there when set
        self.file_of = {mid: path for path, mid in snap.paths.items()}
        self.folders = {c.name: c.folder for c in snap.config.categories}
        self.session_names = {s.name for s in snap.sessions}
        self.skills: list[SkillCandidate] = promote(s.memory for s in snap.memories)
        self.days = summary_days(snap, self.commits)
        self.chunks: list[str] = []  # finished HTML the pages refer to by placeholder

    def raw(self, html: str) -> str:
        """A placeholder for finished HTML, put in place after Markdown ran (see hooks.on_page_content).

        Python-Markdown would leave the HTML alone anyway, but parsing it to
        find that out is most of the cost of a big page.
        """
        self.chunks.append(html)
        return f"\n{placeholder(len(self.chunks) - 1)}\n"

    # --- helpers ------------------------------------------------------------

    def detail_src(self, memory: Memory) -> str:
        return memory_src(memory, self.folders.get(memory.category, memory.category))

    def memory_link(self, here: str, memory: Memory) -> str:
        return link(here, self.detail_src(memory), memory.abstract, memory.id)

    def meta(self, scored: Scored) -> str:
        m = scored.memory
        parts = [f"score {scored.score:.3f}", text(m.agent), f"created {m.created:%Y-%m-%d}",
                 f"updated {m.updated:%Y-%m-%d}", f"recalled {m.active_count}x"]
        if m.pinned:
            parts.append("pinned")
        if m.tags:
            parts.append("tags: " + ", ".join(f'<span class="memsite-tag">{text(t)}</span>' for t in m.tags))
        # Left out of the search index: it would match every query for "planner" or a year.
        return '<p class="memsite-meta" data-search-exclude>' + " · ".join(parts) + "</p>"

    def entry(self, here: str, scored: Scored) -> str:
        """A memory in a listing: abstract (L0) linking to it in full, overview (L1), metadata.

        Left out of search: the memory's own page is what a search should find.
        """
        m = scored.memory
        overview = _overview(m)
        return (f'<div class="memsite-entry" data-search-exclude>\n<h3 id="{text(m.id)}">'
                f"{self.memory_link(here, m)}</h3>\n" + (f"<p>{text(overview)}</p>\n" if overview else "")
                + f"{self.meta(scored)}\n</div>")

    def commit_link(self, here: str, commit: Commit) -> str:
        """A commit: on the hosted repository when ``repo_url`` is set, else the report of its day."""
        label = f"<code>{commit.sha[:10]}</code>"
        if self.repo_url:
            return f'<a href="{text(self.repo_url)}/commit/{commit.sha}">{label}</a>'
        return f'<a href="{safe.href(here, f"reports/{commit.when:%Y-%m-%d}.md")}">{label}</a>'

    def agent_link(self, here: str, agent: str) -> str:
        return link(here, f"agents/{agent}.md", agent)

    def session_link(self, here: str, session: SessionRecord) -> str:
        return link(here, f"sessions/{session.name}.md", f"{session.finished:%Y-%m-%d} {session.type}: "
                    + (", ".join(session.keywords) or session.name))

    def rows(self, here: str, members: Iterable[Scored], start: int = 1) -> str:
        """A ranking table: rank, the memory (with its category and score parts), score. Not searched."""
        out = ['<div class="memsite-rank" data-search-exclude><table>',
               '<thead><tr><th>#</th><th>Memory</th><th class="memsite-num">Score</th></tr></thead><tbody>']
        for n, s in enumerate(members, start=start):
            m = s.memory
            out.append(f'<tr><td>{n}</td><td>{self.memory_link(here, m)}<br><span class="memsite-meta">'
                       f"{text(m.category)} · decay {s.decay:.3f} × boost {s.boost:.3f}"
                       f'{" · pinned" if m.pinned else ""}</span></td>'
                       f'<td class="memsite-num">{s.score:.3f}</td></tr>')
        out.append("</tbody></table></div>")
        return self.raw("\n".join(out))

    # --- pages --------------------------------------------------------------

    def pages(self) -> dict[str, str]:
        """Every page: src_uri -> Markdown."""
        pages = {"index.md": self.dashboard(), "rankings.md": self.rankings(), "skills.md": self.skills_page(),
                 "world.md": self.world(), "memories/index.md": self.categories()}
        pages.update(self.category_pages())
        pages.update(self.detail_pages())
        pages.update(self.summary_pages())
        pages.update(self.session_pages())
        pages.update(self.agent_pages())
        pages.update(self.report_pages())
        return pages

    def dashboard(self) -> str:
        """The home page: counts, charts, the latest changes, what is fading, open tasks, recent sessions.

        Left out of search: everything on it is a table or list of what the
        other pages hold.
        """
        here, snap = "index.md", self.snap
        grouped = self.snap.by_category()
        created = Counter(s.memory.created.date() for s in snap.memories)
        running, points = 0, []
        for day in sorted(created):
            running += created[day]
            points.append((day, running))
        cards = [(len(snap.memories), "memory", "memories", "memories/index.md"),
                 (len(grouped), "category", "categories", "memories/index.md"),
                 (len(snap.agents()), "agent", "agents", "agents/index.md"),
                 (len(snap.sessions), "session", "sessions", "sessions/index.md"),
                 (len(snap.tasks), "open task", "open tasks", "index.md#open-tasks"),
                 (len(self.skills), "skill draft to review", "skill drafts to review", "skills.md")]
        lines = [
            safe.front(None, search=False), f"# {safe.inline(self.site_name)}", "",
            f"What the agents have learned, ranked as of {snap.now:%Y-%m-%d %H:%M} UTC.", "",
            '<div class="memsite-cards">' + "".join(
                f'<a class="memsite-card" href="{_card_href(here, target)}"><strong>{n}</strong> '
                f"{one if n == 1 else many}</a>" for n, one, many, target in cards) + "</div>", "",
            "## Latest changes", "", self.latest_changes(here), "",
            "## Open tasks", "", self.open_tasks(here), "",
            "## Fading soon", "", self.fading_soon(here), "",
            "## Memories by category", "",
            self.raw(charts.bars([(name, len(members)) for name, members in grouped.items()],
                                 "Memories by category")), "",
            "## Memories over time", "",
            self.raw(charts.timeline(points, "Memories over time (total)")), "",
            "## Top-ranked memories", "",
            self.rows(here, snap.memories[:10]) if snap.memories else "No memories yet.", "",
        ]
        if self.days:
            latest = self.days[0]
            summary = daily_summary(snap, latest, safe.inline, lambda s: self.memory_link(here, s.memory))
            body = ("\n" + summary.split("\n", 2)[2]).replace("\n## ", "\n### ")
            lines += [f"## Latest daily summary: {link(here, f'summaries/{latest.day}.md', latest.day.isoformat())}",
                      "", body, ""]
        lines += ["## Recent sessions", ""]
        lines += [f"- {self.session_link(here, s)} — {self.agent_link(here, s.agent)}, {text(s.outcome)}"
                  for s in snap.sessions[:10]]
        if not snap.sessions:
            lines.append("No sessions yet.")
        return "\n".join(lines) + "\n"

    def latest_changes(self, here: str) -> str:
        """The newest commits that changed memories: when, who, what, and the commit."""
        by_id = {s.memory.id: s.memory for s in self.snap.memories}
        sessions = self.snap.config.sessions_dir + "/"
        items = []
        for commit in reversed(self.commits):
            changed = [(mid, action) for mid, action, _ in commit.actions if action != "recalled"]
            closed = [Path(path).stem for status, path in commit.files
                      if status == "A" and path.startswith(sessions) and Path(path).stem in self.session_names]
            if not changed and not closed:
                continue  # recall counts are no news
            parts = [f"{text(action or 'changed')} " + (self.memory_link(here, by_id[mid]) if mid in by_id else
                     f"<code>{text(mid)}</code> (no longer in memory)") for mid, action in changed[:3]]
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
        return self.raw("<ul>" + "".join(out) + "</ul>")

    def fading_soon(self, here: str) -> str:
        """The memories the next overflowing write would trim, per capped category."""
        at_risk = self.trim_forecast()
        if not at_risk:
            return ("No category has a capacity: nothing is ever trimmed. "
                    f"See {link(here, 'rankings.md', 'the rankings', 'fading-from-recall')} for what recall finds last.")
        out = []
        for category, fill, ids in at_risk:
            members = [s for s in self.snap.by_category()[category.name] if s.memory.id in ids]
            out.append(f"<li>{link(here, f'memories/{category.folder}/index.md', category.name)} ({fill}): "
                       + (", ".join(self.memory_link(here, s.memory) for s in members) if members else
                          "nothing would be trimmed by the next write") + "</li>")
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
                fill.append(f"{len(members)} of {category.capacity.entries.high} memories")
            if category.capacity.lines is not None:
                fill.append(f"{sum(m.lines for m in members)} of {category.capacity.lines.high} lines")
            result.append((category, ", ".join(fill), ids))
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

    def category_pages(self) -> dict[str, str]:
        pages = {}
        grouped = self.snap.by_category()
        for category in self.snap.config.categories:
            members = grouped.get(category.name, [])
            count = max(1, -(-len(members) // PER_PAGE))
            srcs = [f"memories/{category.folder}/index.md"] + [
                f"memories/{category.folder}/page-{n}.md" for n in range(2, count + 1)]
            for number, here in enumerate(srcs, start=1):
                chunk = members[(number - 1) * PER_PAGE: number * PER_PAGE]
                title = category.name + (f" (page {number} of {count})" if count > 1 else "")
                capacity = _capacity(category)
                lines = [safe.front(title), f"# {safe.inline(title)}", "", f"> {safe.inline(category.description)}", "",
                         f"{len(members)} memories, best ranked first"
                         + (f"; capacity {capacity}" if capacity else "") + ".", ""]
                lines.append(self.raw("\n".join(self.entry(here, s) for s in chunk)) if chunk else
                             "No memories in this category yet.\n")
                if count > 1:
                    lines.append(_pager(here, srcs, number))
                pages[here] = "\n".join(lines) + "\n"
        return pages

    def detail_pages(self) -> dict[str, str]:
        """Each memory in full on the page of its category and month."""
        buckets: dict[str, list[Scored]] = {}
        for s in self.snap.memories:
            buckets.setdefault(self.detail_src(s.memory), []).append(s)
        pages = {}
        for here, members in buckets.items():
            members.sort(key=lambda s: (s.memory.created, s.memory.id))
            category = members[0].memory.category
            title = f"{category}, created {members[0].memory.created:%Y-%m}"
            lines = [safe.front(title, boost=2), f"# {safe.inline(title)}", "",
                     link(here, f"memories/{self.folders.get(category, category)}/index.md", f"All {category}"), ""]
            lines.append(self.raw("\n".join(self.article(here, s) for s in members)))
            pages[here] = "\n".join(lines) + "\n"
        return pages

    def article(self, here: str, scored: Scored) -> str:
        """One memory in full. The heading carries the anchor and, for search, the abstract; the id
        and the text follow it, the facts are left out of search (they would match every query
        for an agent's name or a year)."""
        m = scored.memory
        source = text(m.source) if m.source else "unknown"
        if m.source in self.session_names:
            source = link(here, f"sessions/{m.source}.md", m.source)
        changes = self.history.get(m.id, [])
        facts = [("Agent", self.agent_link(here, m.agent)),
                 ("Created", f"{m.created:%Y-%m-%d %H:%M}"), ("Updated", f"{m.updated:%Y-%m-%d %H:%M}"),
                 ("Recalled", safe.plural(m.active_count, "time")
                  + (f", last {m.last_recalled:%Y-%m-%d}" if m.last_recalled else "")),
                 ("Score", f"{scored.score:.3f} = decay {scored.decay:.3f} × boost {scored.boost:.3f}"
                  + (" (pinned: no decay)" if m.pinned else "")),
                 ("Source", source),
                 ("Tags", ", ".join(f'<span class="memsite-tag">{text(t)}</span>' for t in m.tags) or "none")]
        if changes:
            last = changes[0][0]
            facts.append(("Last change", f"{last.when:%Y-%m-%d %H:%M} by {self.agent_link(here, last.author)}, "
                          f"{self.commit_link(here, last)}"))
        path = self.file_of.get(m.id)
        if self.repo_url and path:
            facts.append(("History", f'<a href="{text(self.repo_url)}/commits/HEAD/{text(path)}">'
                          f"{safe.plural(len(changes), 'change')} to <code>{text(path)}</code></a>"))
        elif changes:
            facts.append(("History", f'<a href="#history-{text(m.id)}">{safe.plural(len(changes), "change")}</a>'))
        dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
        items = "".join(
            f"<li>{c.when:%Y-%m-%d %H:%M} {text(action)} by {text(c.author)} in {self.commit_link(here, c)}: "
            f"{text(c.subject)}</li>" for c, action in changes[:30])
        overview = _overview(m)
        if overview and safe.plain(m.content).startswith(overview.rstrip(".…")):
            overview = ""  # the body opens with it: saying it twice helps nobody
        return (f'<article class="memsite-memory">\n<h2 id="{text(m.id)}">{text(m.abstract)}</h2>\n'
                f'<p class="memsite-id">id <code>{text(m.id)}</code></p>\n'
                + (f'<p class="memsite-overview">{text(overview)}</p>\n' if overview else "")
                + f'<dl class="memsite-facts" data-search-exclude>{dl}</dl>\n'
                f'<div class="memsite-body">{safe.body(m.content)}</div>\n'
                + (f'<details class="memsite-history" id="history-{text(m.id)}" data-search-exclude>'
                   f"<summary>History</summary><ul>{items}</ul></details>\n" if items else "") + "</article>")

    def rankings(self) -> str:
        here, snap, config = "rankings.md", self.snap, self.snap.config
        capped = {c.name for c in config.categories if c.capacity.bounded}
        fading = sorted((s for s in snap.memories if not s.memory.pinned and s.memory.category not in capped),
                        key=lambda s: (s.score, s.memory.id))
        lines = [
            safe.front("Rankings", search=False), "# Rankings", "",
            "Every memory fades unless it keeps being recalled:", "",
            '<pre class="memsite-formula"><code>score = decay × boost\n'
            f"decay = 2^(−age_days / {config.half_life_days:g})\n"
            f"boost = 1 + {config.active_weight:g} × ln(1 + recalls)</code></pre>", "",
            f"Decay has a half-life of {config.half_life_days:g} days: a memory loses half its score every "
            f"{config.half_life_days:g} days; pinned memories do not decay.", "",
            "## Overall", "", self.rows(here, snap.memories[:50]) if snap.memories else "No memories yet.", "",
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
            self.rows(here, fading[:FADING]) if fading else "Nothing is fading.", "",
        ]
        for name, members in snap.by_category().items():
            if members:
                lines += [f"## {safe.inline(name)}", "", self.rows(here, members[:10]), ""]
        return "\n".join(lines)

    def summary_pages(self) -> dict[str, str]:
        pages = {}
        index = [safe.front("Daily summaries", search=False), "# Daily summaries", "",
                 "Each day as it stood at its last commit: recall counts too.", "",
                 "| Day | Memories | New | Sessions |",
                 "|---|---:|---:|---:|"]
        for day in self.days:
            here = f"summaries/{day.day.isoformat()}.md"
            markdown = daily_summary(self.snap, day, safe.inline, lambda s, h=here: self.memory_link(h, s.memory))
            pages[here] = safe.front(f"Summary {day.day.isoformat()}", search=False) + markdown
            index.append(f"| {link('summaries/index.md', here, day.day.isoformat())} | {day.total} | {len(day.new)} | "
                         f"{day.sessions} |")
        if not self.days:
            index.append("\nNo activity yet.")
        pages["summaries/index.md"] = "\n".join(index) + "\n"
        return pages

    def skills_page(self) -> str:
        here = "skills.md"
        lines = [safe.front("Skill drafts", boost=1.5), "# Skill drafts", "",
                 "Patterns recalled often enough to become agent skills, awaiting review. "
                 "`memsite skills --write DIR` writes each as a SKILL.md draft.", ""]
        by_id = {s.memory.id: s.memory for s in self.snap.memories}
        for c in self.skills:
            pattern = by_id[c.source_pattern_id]
            lines += [f"## {safe.inline(c.name)}", "",
                      f"<p>{text(c.description)}</p>",
                      f'<p class="memsite-meta">confidence {c.confidence:.0%} · recalled {c.recalls}x · '
                      f"{c.analysis} analysis · source pattern {self.memory_link(here, pattern)}</p>", "",
                      "<p><strong>When to use</strong></p><ul>" + "".join(f"<li>{text(t)}</li>" for t in c.triggers)
                      + "</ul>", "",
                      "<p><strong>Steps</strong></p><ol>" + "".join(f"<li>{text(s)}</li>" for s in c.steps)
                      + "</ol>", ""]
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
            lines.append('<table><thead><tr><th>Key</th><th>Value</th></tr></thead><tbody>'
                         + "".join(f'<tr><td id="{text(k)}"><code>{text(k)}</code></td><td>{safe.body(v)}</td></tr>'
                                   for k, v in sorted(self.snap.world.items())) + "</tbody></table>")
        else:
            lines.append("No world state yet.")
        return "\n".join(lines) + "\n"


def summary_days(snap: Snapshot, commits: list[Commit]) -> list[Day]:
    """The daily summaries of ``snap``, each day as it stood at its end according to the history."""
    return days(snap, [(c.when.date(), mid, n) for c in commits for mid, n in c.recalls],
                history.removals(commits, {s.memory.id for s in snap.memories}))


def projection(snap: Snapshot, *, include_l1: bool = True, commits: list[Commit] | None = None) -> dict[str, str]:
    """``memsite project``: by-category/<category>.md and summaries/<date>.md, plain Markdown."""
    plain = lambda value: " ".join(str(value or "").split())  # noqa: E731
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


def _overview(memory: Memory) -> str:
    """The overview (L1) as plain text, or '' when it only repeats the abstract."""
    overview = safe.plain(memory.overview)
    return "" if overview.rstrip(".") == safe.plain(memory.abstract).rstrip(".") else overview


def _card_href(here: str, target: str) -> str:
    page, _, anchor = target.partition("#")
    return safe.href(here, page, anchor or None)


def _capacity(category: Category) -> str:
    """The category's high marks, as the page states them ('' when unbounded)."""
    marks = (("entries", category.capacity.entries), ("lines", category.capacity.lines))
    return " / ".join(f"{mark.high} {unit}" for unit, mark in marks if mark is not None)


def _pager(here: str, srcs: list[str], number: int) -> str:
    links = [(f"<strong>{n}</strong>" if n == number else link(here, src, str(n))) for n, src in enumerate(srcs, 1)]
    return '<nav class="memsite-pager">Pages: ' + " ".join(links) + "</nav>\n"
