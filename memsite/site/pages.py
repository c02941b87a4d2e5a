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

import json
from collections import Counter
from collections.abc import Iterable

from ..config import Category
from ..model import Memory
from ..sessions import SessionRecord
from ..skills import SkillCandidate, promote
from .. import history
from ..history import Commit
from . import charts, safe
from .safe import link, text
from .snapshot import Scored, Snapshot
from .summaries import category_projection, daily_summary, days

PER_PAGE = 50
FADING = 20


def memory_src(memory: Memory, folder: str) -> str:
    """The page holding ``memory`` in full: its category folder and the month it was created."""
    return f"memories/{folder}/{memory.created:%Y-%m}.md"


class Site:
    """Renders the pages of one snapshot."""

    def __init__(self, snap: Snapshot, site_name: str = "Agent memory", commits: list[Commit] | None = None) -> None:
        self.snap = snap
        self.commits = commits or []
        self.history = history.by_memory(self.commits, snap.paths)
        self.site_name = site_name
        self.folders = {c.name: c.folder for c in snap.config.categories}
        self.session_names = {s.name for s in snap.sessions}
        self.skills: list[SkillCandidate] = promote(s.memory for s in snap.memories)
        self.days = days(snap)
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
        """A memory in a listing: abstract (L0) linking to it in full, overview (L1), metadata."""
        m = scored.memory
        return (f'<div class="memsite-entry">\n<h3 id="{text(m.id)}">{self.memory_link(here, m)}</h3>\n'
                f"<p>{text(m.overview)}</p>\n{self.meta(scored)}\n</div>")

    def session_link(self, here: str, session: SessionRecord) -> str:
        return link(here, f"sessions/{session.name}.md", f"{session.finished:%Y-%m-%d} {session.type}: "
                    + (", ".join(session.keywords) or session.name))

    def rows(self, here: str, members: Iterable[Scored], start: int = 1) -> str:
        """A ranking table: rank, score and its parts, category, abstract."""
        out = ["<table>", "<thead><tr><th>#</th><th>Score</th><th>Decay</th><th>Boost</th>"
               "<th>Category</th><th>Memory</th></tr></thead><tbody>"]
        for n, s in enumerate(members, start=start):
            out.append(f"<tr><td>{n}</td><td>{s.score:.3f}</td><td>{s.decay:.3f}</td><td>{s.boost:.3f}</td>"
                       f"<td>{text(s.memory.category)}</td><td>{self.memory_link(here, s.memory)}</td></tr>")
        out.append("</tbody></table>")
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
        here, snap = "index.md", self.snap
        grouped = self.snap.by_category()
        created = Counter(s.memory.created.date() for s in snap.memories)
        running, points = 0, []
        for day in sorted(created):
            running += created[day]
            points.append((day, running))
        cards = [(len(snap.memories), "memories", "memories/index.md"), (len(grouped), "categories", "memories/index.md"),
                 (len(snap.agents()), "agents", "agents/index.md"), (len(snap.sessions), "sessions", "sessions/index.md"),
                 (len(self.skills), "skill drafts to review", "skills.md")]
        lines = [
            _front(self.site_name), f"# {safe.inline(self.site_name)}", "",
            f"What the agents have learned, ranked as of {snap.now:%Y-%m-%d %H:%M} UTC.", "",
            '<div class="memsite-cards">' + "".join(
                f'<a class="memsite-card" href="{safe.href(here, target)}"><strong>{n}</strong> {label}</a>'
                for n, label, target in cards) + "</div>", "",
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
        lines += [f"- {self.session_link(here, s)} — {text(s.agent)}, {text(s.outcome)}" for s in snap.sessions[:10]]
        if not snap.sessions:
            lines.append("No sessions yet.")
        return "\n".join(lines) + "\n"

    def categories(self) -> str:
        here = "memories/index.md"
        lines = [_front("Memories"), "# Memories", "", "| Category | Memories | What it holds |", "|---|---:|---|"]
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
                lines = [_front(title), f"# {safe.inline(title)}", "", f"> {safe.inline(category.description)}", "",
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
            lines = [_front(title, search=False), f"# {safe.inline(title)}", "",
                     link(here, f"memories/{self.folders.get(category, category)}/index.md", f"All {category}"), ""]
            lines.append(self.raw("\n".join(self.article(here, s) for s in members)))
            pages[here] = "\n".join(lines) + "\n"
        return pages

    def article(self, here: str, scored: Scored) -> str:
        m = scored.memory
        source = text(m.source) if m.source else "unknown"
        if m.source in self.session_names:
            source = link(here, f"sessions/{m.source}.md", m.source)
        facts = [("Id", text(m.id)), ("Agent", link(here, f"agents/{m.agent}.md", m.agent)),
                 ("Created", f"{m.created:%Y-%m-%d %H:%M}"), ("Updated", f"{m.updated:%Y-%m-%d %H:%M}"),
                 ("Recalled", f"{m.active_count} times" + (f", last {m.last_recalled:%Y-%m-%d}" if m.last_recalled else "")),
                 ("Score", f"{scored.score:.3f} = decay {scored.decay:.3f} × boost {scored.boost:.3f}"
                  + (" (pinned: no decay)" if m.pinned else "")),
                 ("Source", source),
                 ("Tags", ", ".join(f'<span class="memsite-tag">{text(t)}</span>' for t in m.tags) or "none")]
        dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
        changes = "".join(
            f"<li>{c.when:%Y-%m-%d %H:%M} {text(action)} by {text(c.author)} in <code>{c.sha[:10]}</code>: "
            f"{text(c.subject)}</li>" for c, action in self.history.get(m.id, [])[:30])
        return (f'<article class="memsite-memory" id="{text(m.id)}">\n<h2>{text(m.abstract)}</h2>\n'
                f'<p class="memsite-overview">{text(m.overview)}</p>\n<dl class="memsite-facts">{dl}</dl>\n'
                f'<div class="memsite-body">{safe.body(m.content)}</div>\n'
                + (f'<details class="memsite-history"><summary>History</summary><ul>{changes}</ul></details>\n'
                   if changes else "") + "</article>")

    def rankings(self) -> str:
        here, snap, config = "rankings.md", self.snap, self.snap.config
        fading = sorted((s for s in snap.memories if not s.memory.pinned), key=lambda s: (s.score, s.memory.id))
        lines = [
            _front("Rankings"), "# Rankings", "",
            "Every memory fades unless it keeps being recalled:", "",
            "```",
            "score = decay × boost",
            f"decay = 2^(-age_days / {config.half_life_days:g})        (half-life {config.half_life_days:g} days;"
            " pinned memories do not decay)",
            f"boost = 1 + {config.active_weight:g} × ln(1 + recalls)",
            "```", "",
            "## Overall", "", self.rows(here, snap.memories[:50]) if snap.memories else "No memories yet.", "",
            "## Fading", "",
            "The lowest scores: the next to go when a category passes its capacity.", "",
            self.rows(here, fading[:FADING]) if fading else "Nothing is fading.", "",
        ]
        for name, members in snap.by_category().items():
            if members:
                lines += [f"## {safe.inline(name)}", "", self.rows(here, members[:10]), ""]
        return "\n".join(lines)

    def summary_pages(self) -> dict[str, str]:
        pages = {}
        index = [_front("Daily summaries"), "# Daily summaries", "", "| Day | Memories | New | Sessions |",
                 "|---|---:|---:|---:|"]
        for day in self.days:
            here = f"summaries/{day.day.isoformat()}.md"
            markdown = daily_summary(self.snap, day, safe.inline, lambda s, h=here: self.memory_link(h, s.memory))
            pages[here] = _front(f"Summary {day.day.isoformat()}") + markdown
            index.append(f"| {link('summaries/index.md', here, day.day.isoformat())} | {day.total} | {len(day.new)} | "
                         f"{day.sessions} |")
        if not self.days:
            index.append("\nNo activity yet.")
        pages["summaries/index.md"] = "\n".join(index) + "\n"
        return pages

    def skills_page(self) -> str:
        here = "skills.md"
        lines = [_front("Skill drafts"), "# Skill drafts", "",
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
        lines = [_front("World state"), "# World state", "",
                 "Shared facts every agent reads at the start of a task, merged key by key.", ""]
        if self.snap.world_preamble.strip():
            lines += [f'<div class="memsite-body">{safe.body(self.snap.world_preamble)}</div>', ""]
        if self.snap.world:
            lines.append('<table><thead><tr><th>Key</th><th>Value</th></tr></thead><tbody>'
                         + "".join(f'<tr><td id="{text(k)}"><code>{text(k)}</code></td><td>{safe.body(v)}</td></tr>'
                                   for k, v in sorted(self.snap.world.items())) + "</tbody></table>")
        else:
            lines.append("No world state yet.")
        return "\n".join(lines) + "\n"

    def session_pages(self) -> dict[str, str]:
        pages = {}
        index = [_front("Sessions"), "# Sessions", "", "The append-only event log: one record per task, newest first.",
                 ""]
        month = None
        for s in self.snap.sessions:
            if f"{s.finished:%Y-%m}" != month:
                month = f"{s.finished:%Y-%m}"
                index += ["", f"## {month}", ""]
            index.append(f"- {self.session_link('sessions/index.md', s)} — {text(s.agent)}, {text(s.outcome)}, "
                         f"{s.rounds} rounds")
            pages[f"sessions/{s.name}.md"] = self.session(s)
        if not self.snap.sessions:
            index.append("No sessions yet.")
        pages["sessions/index.md"] = "\n".join(index) + "\n"
        return pages

    def session(self, s: SessionRecord) -> str:
        here = f"sessions/{s.name}.md"
        title = f"{s.type}: {', '.join(s.keywords) or s.name}"
        facts = [("Agent", link(here, f"agents/{s.agent}.md", s.agent)), ("Outcome", text(s.outcome)),
                 ("Started", f"{s.started:%Y-%m-%d %H:%M}"), ("Finished", f"{s.finished:%Y-%m-%d %H:%M}"),
                 ("Rounds", str(s.rounds)), ("Keywords", text(", ".join(s.keywords)))]
        lines = [_front(title), f"# {safe.inline(title)}", "",
                 '<dl class="memsite-facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>", ""]
        for heading, value in (("Problem", s.problem), ("Solution", s.solution), ("Pattern", s.pattern),
                               ("Error", s.error)):
            if value:
                lines += [f"## {heading}", "", f'<div class="memsite-body">{safe.body(value)}</div>', ""]
        if s.learnings:
            lines += ["## Learnings", "", "<ul>" + "".join(f"<li>{text(x)}</li>" for x in s.learnings) + "</ul>", ""]
        memories = [x for x in self.snap.memories if x.memory.source == s.name]
        if memories:
            lines += ["## Memories from this session", ""] + [f"- {self.memory_link(here, x.memory)}" for x in memories]
        return "\n".join(lines) + "\n"

    def agent_pages(self) -> dict[str, str]:
        pages = {}
        index = [_front("Agents"), "# Agents", "", "| Agent | Memories | Sessions | Tasks | Last active |",
                 "|---|---:|---:|---:|---|"]
        for agent in self.snap.agents():
            mine = [s for s in self.snap.memories if s.memory.agent == agent]
            sessions = [s for s in self.snap.sessions if s.agent == agent]
            knowledge = self.snap.knowledge.get(agent)
            times = [s.memory.updated for s in mine] + [s.finished for s in sessions]
            last = f"{max(times):%Y-%m-%d}" if times else ""
            index.append(f"| {link('agents/index.md', f'agents/{agent}.md', agent)} | {len(mine)} | {len(sessions)} | "
                         f"{knowledge.task_count if knowledge else 0} | {last} |")
            pages[f"agents/{agent}.md"] = self.agent(agent, mine, sessions)
        pages["agents/index.md"] = "\n".join(index) + "\n"
        return pages

    def agent(self, agent: str, mine: list[Scored], sessions: list[SessionRecord]) -> str:
        here = f"agents/{agent}.md"
        knowledge = self.snap.knowledge.get(agent)
        lines = [_front(agent), f"# {safe.inline(agent)}", "", "## Knowledge", ""]
        if knowledge:
            lines.append(f"{knowledge.task_count} tasks, {knowledge.total_rounds} rounds in all.")
            lines += ["", "<ul>" + "".join(f"<li>{text(p)}</li>" for p, _ in knowledge.patterns) + "</ul>"
                      if knowledge.patterns else "No patterns recorded yet."]
        else:
            lines.append("No knowledge notes yet.")
        recent = sorted(mine, key=lambda s: (s.memory.updated, s.memory.id), reverse=True)[:20]
        lines += ["", "## Recent memories", ""]
        lines += [f"- {s.memory.updated:%Y-%m-%d} {self.memory_link(here, s.memory)}" for s in recent] or ["None yet."]
        lines += ["", "## Sessions", ""]
        lines += [f"- {self.session_link(here, s)} — {text(s.outcome)}" for s in sessions[:50]] or ["None yet."]
        return "\n".join(lines) + "\n"


    def report_pages(self) -> dict[str, str]:
        """``/reports/``: what each day's commits did, from the trailers (reproducible at any revision)."""
        by_id = {s.memory.id: s.memory for s in self.snap.memories}
        pages = {}
        index = [_front("Reports"), "# Reports", "", "What happened each day, from the commits.", "",
                 "| Day | Created | Merged | Skipped | Trimmed | Sessions | Commits |",
                 "|---|---:|---:|---:|---:|---:|---:|"]
        for report in history.daily(self.commits, f"{self.snap.config.content_dir}/sessions"):
            here = f"reports/{report.day.isoformat()}.md"

            def abstract(mid: str, here: str = here) -> str:
                memory = by_id.get(mid)
                return self.memory_link(here, memory) if memory else f"{text(mid)} (no longer in memory)"

            pages[here] = _front(f"Report {report.day.isoformat()}") + history.render_day(report, abstract,
                                                                                            safe.inline)
            c = report.counts
            index.append(f"| {link('reports/index.md', here, report.day.isoformat())} | {c['created']} | "
                         f"{c['merged']} | {c['skipped']} | {c['trimmed']} | {len(report.sessions)} | "
                         f"{report.commits} |")
        if not self.commits:
            index.append("\nNo history: the site was built outside a git repository.")
        pages["reports/index.md"] = "\n".join(index) + "\n"
        return pages


def projection(snap: Snapshot, *, include_l1: bool = True) -> dict[str, str]:
    """``memsite project``: by-category/<category>.md and summaries/<date>.md, plain Markdown."""
    plain = lambda value: " ".join(str(value or "").split())  # noqa: E731
    files = {}
    grouped = snap.by_category()
    for category in snap.config.categories:
        files[f"by-category/{category.name}.md"] = category_projection(
            category.name, category.description, grouped.get(category.name, []), plain, include_l1=include_l1,
            updated=f"{snap.now:%Y-%m-%dT%H:%M:%SZ}")
    for day in days(snap):
        files[f"summaries/{day.day.isoformat()}.md"] = daily_summary(snap, day, plain,
                                                                     lambda s: plain(s.memory.abstract))
    return files


def placeholder(number: int) -> str:
    return f"<!--memsite-html {number}-->"


def _front(title: str, *, search: bool = True) -> str:
    """Frontmatter of a generated page; the title escaped, as Material prints it unescaped."""
    lines = ["---", f"title: {json.dumps(text(title))}"]
    if not search:
        lines += ["search:", "  exclude: true"]
    return "\n".join(lines + ["---", ""])


def _capacity(category: Category) -> str:
    """The category's high marks, as the page states them ('' when unbounded)."""
    marks = (("entries", category.capacity.entries), ("lines", category.capacity.lines))
    return " / ".join(f"{mark.high} {unit}" for unit, mark in marks if mark is not None)


def _pager(here: str, srcs: list[str], number: int) -> str:
    links = [(f"<strong>{n}</strong>" if n == number else link(here, src, str(n))) for n, src in enumerate(srcs, 1)]
    return '<nav class="memsite-pager">Pages: ' + " ".join(links) + "</nav>\n"
