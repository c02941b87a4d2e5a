"""The pages of the logs: sessions (the event log), agents, and the daily reports from the commits.

Mixed into :class:`pages.Site`, whose helpers (links, placeholders for
finished HTML) they use.
"""

from __future__ import annotations

from .. import history
from ..sessions import SessionRecord
from . import safe
from .safe import link, plural, text
from .snapshot import Scored


class LogPages:
    """Session, agent and report pages of a :class:`pages.Site`."""

    def session_pages(self) -> dict[str, str]:
        pages = {}
        index = [safe.front("Sessions", search=False), "# Sessions", "",
                 "The append-only event log: one record per task, newest first.", ""]
        month = None
        for s in self.snap.sessions:
            if f"{s.finished:%Y-%m}" != month:
                month = f"{s.finished:%Y-%m}"
                index += ["", f"## {month}", ""]
            index.append(f"- {self.session_link('sessions/index.md', s)} — "
                         f"{self.agent_link('sessions/index.md', s.agent)}, {text(s.outcome)}, "
                         f"{plural(s.rounds, 'round')}")
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
        lines = [safe.front(title, boost=1.5), f"# {safe.inline(title)}", "",
                 '<dl class="memsite-facts" data-search-exclude>' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>", ""]
        for heading, value in (("Problem", s.problem), ("Solution", s.solution), ("Pattern", s.pattern),
                               ("Error", s.error)):
            if value:
                lines += [f"## {heading}", "", f'<div class="memsite-body">{safe.body(value)}</div>', ""]
        if s.plan:
            lines += ["## Plan", "", "<ul>" + "".join(
                f"<li>{'☑' if done else '☐'} {text(item)}" + (f" — {text(note)}" if note else "") + "</li>"
                for item, done, note in s.plan) + "</ul>", ""]
        if s.learnings:
            lines += ["## Learnings", "", "<ul>" + "".join(f"<li>{text(x)}</li>" for x in s.learnings) + "</ul>", ""]
        memories = [x for x in self.snap.memories if x.memory.source == s.name]
        if memories:
            lines += ["## Memories from this session", "", self.raw("<ul data-search-exclude>" + "".join(
                f"<li>{self.memory_link(here, x.memory)}</li>" for x in memories) + "</ul>")]
        return "\n".join(lines) + "\n"

    def agent_pages(self) -> dict[str, str]:
        pages = {}
        index = [safe.front("Agents", search=False), "# Agents", "", "| Agent | Memories | Sessions | Tasks | Last active |",
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
        lines = [safe.front(agent), f"# {safe.inline(agent)}", "", "## Knowledge", ""]
        if knowledge:
            lines.append(f"{plural(knowledge.task_count, 'task')}, {plural(knowledge.total_rounds, 'round')} in all.")
            lines += ["", "<ul>" + "".join(f"<li>{text(p)}</li>" for p, _ in knowledge.patterns) + "</ul>"
                      if knowledge.patterns else "No patterns recorded yet."]
        else:
            lines.append("No knowledge notes yet.")
        recent = sorted(mine, key=lambda s: (s.memory.updated, s.memory.id), reverse=True)[:20]
        lines += ["", "## Recent memories", "", self.raw("<ul data-search-exclude>" + "".join(
            f"<li>{s.memory.updated:%Y-%m-%d} {self.memory_link(here, s.memory)}</li>" for s in recent) + "</ul>")
            if recent else "None yet."]
        lines += ["", "## Sessions", "", self.raw("<ul data-search-exclude>" + "".join(
            f"<li>{self.session_link(here, s)} — {text(s.outcome)}</li>" for s in sessions[:50]) + "</ul>")
            if sessions else "None yet."]
        return "\n".join(lines) + "\n"


    def report_pages(self) -> dict[str, str]:
        """``/reports/``: what each day's commits did, from the trailers (reproducible at any revision)."""
        by_id = {s.memory.id: s.memory for s in self.snap.memories}
        pages = {}
        index = [safe.front("Reports", search=False), "# Reports", "", "What happened each day, from the commits.", "",
                 "| Day | Created | Merged | Skipped | Trimmed | Sessions | Commits |",
                 "|---|---:|---:|---:|---:|---:|---:|"]
        for report in history.daily(self.commits, f"{self.snap.config.content_dir}/sessions"):
            here = f"reports/{report.day.isoformat()}.md"

            def abstract(mid: str, here: str = here) -> str:
                memory = by_id.get(mid)
                return self.memory_link(here, memory) if memory else f"{text(mid)} (no longer in memory)"

            def session(name: str, here: str = here) -> str:
                return link(here, f"sessions/{name}.md", name) if name in self.session_names else safe.inline(name)

            pages[here] = safe.front(f"Report {report.day.isoformat()}", search=False) + history.render_day(
                report, abstract, safe.inline, session)
            c = report.counts
            index.append(f"| {link('reports/index.md', here, report.day.isoformat())} | {c['created']} | "
                         f"{c['merged']} | {c['skipped']} | {c['trimmed']} | {len(report.sessions)} | "
                         f"{report.commits} |")
        if not self.commits:
            index.append("\nNo history: the site was built outside a git repository.")
        pages["reports/index.md"] = "\n".join(index) + "\n"
        return pages
