"""The pages of the logs: sessions (the event log), agents, and each week and day from the commits.

Mixed into :class:`pages.Site`, whose helpers (links, placeholders for
finished HTML) they use.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from ..features import history
from ..features.sessions import SessionRecord
from . import safe, weeks
from .safe import link, plural, text
from .snapshot import Scored

if TYPE_CHECKING:
    from ..features.history import Commit
    from ..foundation.record import Memory
    from .snapshot import Snapshot
    from .summaries import Day


class LogPages:
    """Session, agent and report pages of a :class:`pages.Site`."""

    if TYPE_CHECKING:  # what they use of the Site they are mixed into
        snap: Snapshot
        commits: list[Commit]
        @property
        def days(self) -> list[Day]: ...
        @property
        def timeline(self) -> weeks.Timeline: ...

        def raw(self, html: str) -> str: ...
        def memory_link(self, here: str, memory: Memory) -> str: ...
        def named(self, here: str, mid: str) -> str: ...
        def agent_link(self, here: str, agent: str) -> str: ...
        def session_link(self, here: str, session: SessionRecord) -> str: ...
        def digest(self, start: datetime, end: datetime) -> weeks.Digest: ...
        def digest_body(self, here: str, d: weeks.Digest, *, open_tasks: bool = False) -> str: ...

    def session_pages(self) -> dict[str, str]:
        pages = {}
        index = [safe.front("Sessions"), "# Sessions", "",
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
        lines = [safe.front(title), f"# {safe.inline(title)}", "",
                 '<dl class="memsite-facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>", ""]
        searched = [f'<h2 hidden data-pagefind-meta="title">{text(title)}</h2>']
        for heading, value in (("Problem", s.problem), ("Solution", s.solution), ("Pattern", s.pattern),
                               ("Error", s.error)):
            if value:
                searched.append(f'<h2>{heading}</h2>\n<div class="memsite-body">{safe.body(value)}</div>')
        lines += [self.raw('<div data-pagefind-body data-pagefind-weight="0.5" data-pagefind-meta="category:session">'
                           + "\n".join(searched)
                           + "</div>"), ""]
        if s.plan:
            lines += ["## Plan", "", "<ul>" + "".join(
                f"<li>{'☑' if done else '☐'} {text(item)}" + (f" — {text(note)}" if note else "") + "</li>"
                for item, done, note in s.plan) + "</ul>", ""]
        if s.learnings:
            lines += ["## Learnings", "", "<ul>" + "".join(f"<li>{text(x)}</li>" for x in s.learnings) + "</ul>", ""]
        memories = [x for x in self.snap.memories if x.memory.source == s.name]
        if memories:
            lines += ["## Memories from this session", "", self.raw("<ul>" + "".join(
                f"<li>{self.memory_link(here, x.memory)}</li>" for x in memories) + "</ul>")]
        return "\n".join(lines) + "\n"

    def agent_pages(self) -> dict[str, str]:
        pages = {}
        index = [safe.front("Agents"), "# Agents", "", "| Agent | Memories | Sessions | Tasks | Last active |",
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
        lines += ["", "## Recent memories", "", self.raw("<ul>" + "".join(
            f"<li>{s.memory.updated:%Y-%m-%d} {self.memory_link(here, s.memory)}</li>" for s in recent) + "</ul>")
            if recent else "None yet."]
        lines += ["", "## Sessions", "", self.raw("<ul>" + "".join(
            f"<li>{self.session_link(here, s)} — {text(s.outcome)}</li>" for s in sessions[:50]) + "</ul>")
            if sessions else "None yet."]
        return "\n".join(lines) + "\n"

    def week_pages(self) -> dict[str, str]:
        """``/weeks/``: one page per ISO week, what the agents learned, changed and forgot that week."""
        pages = {}
        index = [safe.front("Weeks"), "# Weeks", "", "What each week brought, newest first (ISO weeks, UTC).", "",
                 "| Week | From | New memories | Tasks closed | Forgotten or trimmed | Commits |",
                 "|---|---|---:|---:|---:|---:|"]
        for name in weeks.weeks(self.timeline):
            start, end = weeks.week_span(name)
            here = f"weeks/{name}.md"
            d = self.digest(start, end)
            title = f"Week {name}"
            pages[here] = "\n".join([safe.front(title), f"# {title}", "",
                                     f"Monday {start:%Y-%m-%d} to Sunday {end - timedelta(days=1):%Y-%m-%d}. "
                                     + _days_line(here, start, set(self.timeline.days)), "",
                                     self.digest_body(here, d)]) + "\n"
            index.append(f"| {link('weeks/index.md', here, name)} | {start:%Y-%m-%d} | {len(d.new)} | "
                         f"{len(d.sessions)} | {len(d.removed)} | {d.commits} |")
        if len(index) == 6:
            index.append("\nNo activity yet.")
        pages["weeks/index.md"] = "\n".join(index) + "\n"
        return pages

    def day_pages(self) -> dict[str, str]:
        """``/days/<date>/``: each day's summary and report in one: totals, what was new, forgotten, who did what.

        Totals and recall counts are the day's as it ended (see summaries.days);
        the rest comes from that day's commits.
        """
        reports = {r.day: r for r in history.daily(self.commits, self.snap.config.sessions_dir)}
        summaries = {d.day: d for d in self.days}
        pages = {}
        index = [safe.front("Days"), "# Days", "", "Each day with activity, newest first: what it added, "
                 "what it took away, and who did it.", "",
                 "| Day | Memories | New | Forgotten or trimmed | Tasks closed | Commits |",
                 "|---|---:|---:|---:|---:|---:|"]
        for day in sorted(set(reports) | set(summaries), reverse=True):
            here = f"days/{day.isoformat()}.md"
            summary, report = summaries.get(day), reports.get(day)
            start = datetime(day.year, day.month, day.day, tzinfo=UTC)
            d = self.digest(start, start + timedelta(days=1))
            week = weeks.iso_week(day)
            lines = [safe.front(f"{day:%A} {day.isoformat()}"), f"# {day:%A} {day.isoformat()}", "",
                     f"Part of {link(here, f'weeks/{week}.md', f'week {week}')}.", ""]
            if summary:
                by_category = ", ".join(f"{n} {safe.inline(c)}" for c, n in summary.by_category.items() if n)
                lines += [f"At the end of the day: {plural(summary.total, 'memory').replace('memorys', 'memories')} "
                          f"in all ({by_category}); "
                          f"{len(summary.new)} new (the day before: {summary.new_before}).", ""]
            if report:
                c = report.counts
                lines += [f"Commits: {report.commits}; created {c['created']}, merged {c['merged']}, skipped "
                          f"{c['skipped']}, forgotten {c['forgotten']}, trimmed {c['trimmed']}; recall counts "
                          f"recorded for {plural(c['recalled'], 'memory').replace('memorys', 'memories')}.", ""]
            lines += [self.digest_body(here, d)]
            if summary and any(n for _, n in summary.top):
                lines += ["### Most recalled by the end of the day", "", self.raw("<ol>" + "".join(
                    f"<li>{self.named(here, s.memory.id)} ({plural(n, 'recall')})</li>" for s, n in summary.top if n)
                    + "</ol>"), ""]
            pages[here] = "\n".join(lines) + "\n"
            index.append(f"| {link('days/index.md', here, day.isoformat())} | {summary.total if summary else ''} | "
                         f"{len(d.new)} | {len(d.removed)} | {len(d.sessions)} | {d.commits} |")
        if not self.commits:
            index.append("\nNo history: the site was built outside a git repository.")
        pages["days/index.md"] = "\n".join(index) + "\n"
        return pages


def _days_line(here: str, start: datetime, existing: set) -> str:
    """The week's days, each linking to its page when it has one."""
    days = [(start + timedelta(days=n)).date() for n in range(7)]
    return "Days: " + ", ".join(link(here, f"days/{d.isoformat()}.md", f"{d:%a} {d:%d}") if d in existing
                                else f"{d:%a} {d:%d}" for d in days) + "."
