"""``memsite demo``: a realistic memory repository with a real git history.

Three agents (planner, coder, reviewer) work through the Python API over a few
simulated weeks ending now: they remember things in every category, run tasks
under the task protocol (sessions, knowledge, world-state merges), recall
what they need (one release pattern often enough to become a skill draft),
forget a stale fact, and overflow the ``cases`` category so it is trimmed.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from .api import MemoryStore
from .foundation.errors import MemsiteError
from .foundation.record import utcnow
from .git import Git

AGENTS = ("planner", "coder", "reviewer")

# (category, abstract, content, tags)
MEMORIES: list[tuple[str, str, str, tuple[str, ...]]] = [
    ("profile", "The user leads the payments platform team",
     "The user leads the payments platform team (six engineers) and owns the checkout and billing services.",
     ("team", "payments")),
    ("profile", "The user works in Berlin, UTC+1",
     "The user works from Berlin (UTC+1) and is usually online 09:00-18:00 local time.", ("timezone",)),
    ("preferences", "Code reviews: small PRs, one concern each",
     "The user wants small pull requests that address one concern each; refactors go in their own PR.",
     ("review", "style")),
    ("preferences", "Python: type hints everywhere, ruff for lint",
     "Python code uses type hints on every public function; lint with ruff, format with ruff format.",
     ("python", "style")),
    ("preferences", "Answers: the command first, then the explanation",
     "When asked how to do something, the user prefers the exact command first and the explanation after it.",
     ("communication",)),
    ("preferences", "Commit messages say why, not only what",
     "Commit messages explain why a change was made; the subject stays under 72 characters.", ("git", "style")),
    ("entities", "billing-api: the service that issues invoices",
     "billing-api issues invoices and talks to the ledger through the events bus. Repo: payments/billing-api. "
     "Owner: the payments platform team.", ("billing", "service")),
    ("entities", "Staging cluster is called vega",
     "The staging Kubernetes cluster is called vega; production is orion. Both run in eu-central-1.",
     ("kubernetes", "staging")),
    ("entities", "The ledger database is Postgres 15 with logical replication",
     "The ledger runs on Postgres 15; a logical replica feeds the analytics warehouse every 5 minutes.",
     ("postgres", "ledger")),
    ("entities", "Checkout latency dashboard",
     "The checkout latency dashboard (p99 by region and gateway): "
     "https://grafana.orion.payments.internal/d/checkout-latency-p99-by-region-and-gateway-eu-central-1?orgId=1",
     ("dashboards", "checkout")),
    ("entities", "Dana Okafor owns the events bus",
     "Dana Okafor owns the events bus (Kafka). Schema changes go through her review.", ("kafka", "people")),
    ("events", "Invoice numbering switched to per-country sequences",
     "Invoices are numbered per country since the tax audit; the old global sequence is read-only.",
     ("billing", "decision")),
    ("events", "Checkout outage: 40 minutes, expired TLS certificate",
     "Checkout was down for 40 minutes after the TLS certificate of the payment gateway expired. Certificates "
     "are now renewed by cert-manager and alert 14 days ahead.", ("incident", "tls")),
    ("events", "Release 4.2 shipped: refunds in the API",
     "Release 4.2 shipped with partial refunds exposed in the public API.", ("release",)),
    ("events", "Decided: no new services in Node, Python or Go only",
     "Architecture review decided new services are written in Python or Go; existing Node services stay.",
     ("decision", "architecture")),
    ("cases", "Flaky checkout tests: pin the browser version",
     "The checkout end-to-end tests failed at random after browser auto-updates. Pinning the browser version "
     "in CI fixed it.", ("ci", "tests")),
    ("cases", "Invoice PDF fonts missing in the container",
     "Invoice PDFs rendered boxes instead of text: the slim image lacked fonts. Installing fonts-dejavu fixed it.",
     ("docker", "pdf")),
    ("cases", "Ledger migration locked the table: use CONCURRENTLY",
     "An index migration locked the ledger table for minutes. Create indexes with CREATE INDEX CONCURRENTLY "
     "outside a transaction.", ("postgres", "migration")),
    ("cases", "Webhook retries duplicated refunds: idempotency keys",
     "Gateway webhook retries created duplicate refunds. Storing the idempotency key with a unique constraint "
     "stopped it.", ("webhooks", "payments")),
    ("cases", "Slow invoice search: missing trigram index",
     "Invoice search took 4 s; a pg_trgm GIN index on the customer name brought it to 30 ms.", ("postgres",)),
    ("cases", "Timezone bug in monthly reports",
     "Monthly reports dropped the last day for UTC+ customers; dates are now computed in the customer's zone.",
     ("reports", "timezone")),
    ("cases", "Kafka consumer lag after deploys: static membership",
     "Consumers rebalanced on every deploy and lag spiked. Static group membership removed the rebalances.",
     ("kafka",)),
    ("cases", "Memory leak in the PDF worker: restart after 500 jobs",
     "The PDF worker leaked memory in the renderer; max-tasks-per-child=500 keeps it bounded until upstream fixes it.",
     ("pdf", "workers")),
    ("cases", "Currency rounding off by one cent",
     "Totals were off by a cent for JPY; amounts are now kept in minor units with the currency's exponent.",
     ("money",)),
    ("cases", "Staging certificates rejected by the gateway sandbox",
     "The gateway sandbox rejected vega's certificates; it needs the full chain, not only the leaf.",
     ("tls", "staging")),
    ("cases", "Alembic heads diverged after parallel branches",
     "Two branches each added a migration and alembic had two heads; 'alembic merge heads' before merging fixes it.",
     ("migration", "python")),
    ("patterns", "Releasing a service to production",
     "How we release a service to production:\n\n1. Merge to main once CI is green.\n2. Tag the commit with the "
     "version (vX.Y.Z).\n3. Watch the canary on orion for 15 minutes.\n4. Promote the canary, or roll back with "
     "'deploy rollback'.\n5. Post the release notes in #payments-releases.", ("release", "deploy")),
    ("patterns", "Adding a column to a busy Postgres table",
     "1. Add the column as nullable, no default.\n2. Backfill in batches of 10,000 rows.\n3. Add the default and "
     "NOT NULL in a later migration.", ("postgres", "migration")),
    ("patterns", "Debugging a failed webhook",
     "- Find the delivery in the gateway dashboard\n- Replay it against staging with the same payload\n"
     "- Check the idempotency key table", ("webhooks",)),
    ("general", "The team's on-call rotation changes on Mondays",
     "On-call hands over every Monday at 10:00 in the payments stand-up.", ("on-call",)),
    ("general", "Design docs live in the payments/docs repository",
     "Design documents are Markdown in payments/docs; decisions get an ADR number.", ("docs",)),
]

TASKS: list[tuple[str, str, tuple[str, ...], str, str, str, dict[str, str]]] = [
    # (agent, type, keywords, problem, solution, learning, world updates)
    ("coder", "debug", ("flaky checkout tests",), "Checkout end-to-end tests fail at random in CI.",
     "Pinned the browser version in the CI image.", "pattern: pin browsers in CI images",
     {"ci.status": "green", "ci.browser": "pinned to 131"}),
    ("planner", "plan", ("release 4.2",), "Plan release 4.2 with partial refunds.",
     "Split the work into API, ledger and docs tasks; release on Thursday.",
     "pattern: release on Thursdays, after a clean canary",
     {"release.next": "4.2 on Thursday"}),
    ("coder", "feature", ("partial refunds",), "Partial refunds are missing from the public API.",
     "Added POST /refunds with an amount; ledger entries reference the invoice line.",
     "pattern: refunds carry an idempotency key to the gateway", {"api.version": "4.2.0-rc1"}),
    ("reviewer", "review", ("refunds api",), "Review the refunds API pull request.",
     "Asked for idempotency keys on refunds; approved after the change.", "pattern: money endpoints need idempotency",
     {"review.queue": "2 open"}),
    ("coder", "debug", ("duplicate refunds",), "Gateway webhook retries create duplicate refunds.",
     "Stored idempotency keys with a unique constraint.", "pattern: dedupe webhooks by idempotency key",
     {"ci.status": "green"}),
    ("planner", "release", ("4.2 canary",), "Ship release 4.2.", "Tagged v4.2.0, canary clean, promoted.",
     "pattern: release on Thursdays", {"release.current": "4.2.0", "release.next": "4.3 (invoice search)"}),
    ("coder", "perf", ("invoice search",), "Invoice search takes 4 seconds.",
     "Added a trigram GIN index on the customer name; 30 ms now.", "pattern: check EXPLAIN before adding caches",
     {"api.version": "4.3.0-dev"}),
    ("reviewer", "review", ("migrations",), "Review the ledger index migration.",
     "Requested CREATE INDEX CONCURRENTLY; merged after the fix.", "pattern: index migrations run concurrently",
     {"review.queue": "0 open"}),
    ("coder", "debug", ("pdf fonts",), "Invoice PDFs show boxes instead of text.",
     "Installed fonts-dejavu in the image.", "pattern: render a PDF in the container test", {"ci.status": "green"}),
    ("planner", "plan", ("q1 roadmap",), "Draft the next quarter's roadmap.",
     "Three themes: per-country invoicing, faster search, fewer incidents.", "pattern: tie roadmap items to incidents",
     {"roadmap.quarter": "per-country invoicing, search, reliability"}),
]

# What each task taught, as the memory its agent writes when the task closes (its source: the session).
LEARNED = {
    "flaky checkout tests": "Flaky checkout tests: pin the browser version",
    "partial refunds": "Release 4.2 shipped: refunds in the API",
    "duplicate refunds": "Webhook retries duplicated refunds: idempotency keys",
    "invoice search": "Slow invoice search: missing trigram index",
    "migrations": "Ledger migration locked the table: use CONCURRENTLY",
    "pdf fonts": "Invoice PDF fonts missing in the container",
    "4.2 canary": "Releasing a service to production",
}

RECALLS = ["how do we release to production", "release canary promote", "postgres migration column",
           "webhook duplicate refunds", "staging cluster name", "code review preferences", "invoice search slow",
           "release a service tag version"]


def create(folder: Path, *, weeks: int = 6, seed: int = 7, end: datetime | None = None,
           progress: Callable[[str], None] | None = None) -> Path:
    """Create the demo repository in ``folder`` (new or empty); returns it.

    Raises:
        MemsiteError: ``folder`` exists and is not empty.
    """
    say = progress or (lambda message: None)
    if folder.exists() and any(folder.iterdir()):
        raise MemsiteError(f"{folder}: not empty; give 'memsite demo' a new folder")
    rng = random.Random(seed)
    end = (end or utcnow()).replace(microsecond=0)
    clock = _Clock(end - timedelta(weeks=weeks))
    say(f"Creating a memory repository in {folder}")
    MemoryStore.init(folder, agent="planner", clock=clock).close()
    _limit_cases(folder, clock.now)
    stores = {agent: MemoryStore(folder, agent=agent, clock=clock) for agent in AGENTS}
    try:
        days = weeks * 7
        learned = {m[1]: m for m in MEMORIES if m[1] in LEARNED.values()}
        memories = [m for m in MEMORIES if m[1] not in learned]
        tasks = list(TASKS)
        per_day = max(1, -(-len(memories) // max(1, days - 2)))
        ids: list[str] = []
        say(f"Simulating {weeks} weeks of three agents at work")
        for day in range(days):
            clock.at(day, hour=9)
            for _ in range(per_day):
                if memories:
                    category, abstract, content, tags = memories.pop(0)
                    store = stores[rng.choice(AGENTS)]
                    ids.append(store.remember(content, category=category, abstract=abstract, tags=tags).id)
                    clock.advance(minutes=rng.randint(5, 90))
            if tasks and day % max(1, days // len(TASKS)) == 1:
                _task(stores, tasks.pop(0), clock, rng, learned)
            if rng.random() < 0.6:
                stores[rng.choice(AGENTS)].recall(rng.choice(RECALLS), limit=2)
                clock.advance(minutes=rng.randint(1, 30))
            if day == days // 2 and ids:
                stores["reviewer"].forget(ids[1], reason="moved to the Lisbon office; timezone no longer true")
            if day == days // 3:  # a near-duplicate: merged into the existing memory
                stores["coder"].remember("The staging Kubernetes cluster is called vega; production is orion. Both "
                                         "run in eu-central-1, in three zones.", category="entities",
                                         tags=("kubernetes",))
        for task in tasks:
            _task(stores, task, clock, rng, learned)
        clock.now = end - timedelta(hours=1)
        for agent in AGENTS:  # the release pattern, in daily use
            stores[agent].recall("release a service to production canary", limit=1)
            stores[agent].recall("how do we release: tag, canary, promote", limit=1)
        clock.now = end
        stores["planner"].flush_activity()
        say("Committed recall counts")
    finally:
        for store in stores.values():
            store.close()
    return folder


def _task(stores: dict[str, MemoryStore], task: tuple, clock: _Clock, rng: random.Random,
          learned: dict[str, tuple[str, str, str, tuple[str, ...]]]) -> None:
    """One task under the protocol; what it taught becomes a memory whose source is its session."""
    agent, type, keywords, problem, solution, learning, world = task
    steps = [("reproduce", problem), ("change", solution), ("verify", "checked on staging (vega)")]
    with stores[agent].task(type=type, keywords=keywords) as t:
        t.plan([item for item, _ in steps])
        for item, note in steps:
            clock.advance(minutes=rng.randint(10, 60))
            t.check(item, note=note)
            t.rounds += 1
        t.problem(problem)
        t.solution(solution)
        t.learn(learning)
        t.world(world)
    memory = learned.pop(LEARNED.get(keywords[0], ""), None)
    if memory is not None:
        category, abstract, content, tags = memory
        clock.advance(minutes=5)
        stores[agent].remember(content, category=category, abstract=abstract, tags=tags, source=t.session)


def _limit_cases(folder: Path, when: datetime) -> None:
    """Give the cases category a capacity, as a person would, so the demo shows trimming."""
    settings = folder / "mkdocs.yml"
    text = settings.read_text()
    text = text.replace("        # capacity: {lines: {high: 500, low: 400}}",
                        "        capacity: {entries: {high: 8, low: 6}}")
    settings.write_text(text)
    stamp = f"{int(when.timestamp())} +0000"
    person = {"GIT_AUTHOR_NAME": "Team lead", "GIT_AUTHOR_EMAIL": "lead@example.com",
              "GIT_COMMITTER_NAME": "Team lead", "GIT_COMMITTER_EMAIL": "lead@example.com",
              "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    git = Git(folder)
    for args in (["add", "mkdocs.yml"], ["commit", "-q", "-m", "Cap the cases category at 8 memories"]):
        git.run(*args, check=True, env=person)


class _Clock:
    """The simulation's time: every store reads it, the simulation moves it."""

    def __init__(self, start: datetime) -> None:
        self.start = start.replace(hour=0, minute=0, second=0)
        self.now = self.start

    def __call__(self) -> datetime:
        return self.now

    def at(self, day: int, hour: int) -> None:
        self.now = max(self.now, self.start + timedelta(days=day, hours=hour))

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)
