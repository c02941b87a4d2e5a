"""A long-horizon memory set: a payments team's agents writing memories for thirteen months.

Generated, deterministically, to read like what agents write down: facts about services, people
and customers, errors and their fixes, decisions, events, and a good deal of routine (reviews,
stand-ups, nightly jobs) that answers nothing. Every fact is written on one day of the thirteen
months; questions ask about facts of any age, each naming the memory that answers it.

Questions come in the kinds a long-conversation benchmark has:

* ``paraphrase``: the fact asked for in other words ("who should I page when the ledger breaks?"
  for "Marta Kowalski leads the team that owns the ledger");
* ``keyword``: the fact's own names and words ("ledger owner team"), as an agent searching does;
* ``temporal``: when something happened ("when did we migrate the ledger to Postgres 16?");
* ``inverse``: a fact asked from its object's side ("which service stalls when fx-rates is down?").

Each service, person and customer has many memories, so a question naming one of them has many
near misses; the routine memories name them too.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

NOW = datetime(2026, 11, 28, 17, 0, tzinfo=UTC)
DAYS = 395  # thirteen months back from NOW
AGES = ((0, 7), (7, 30), (30, 182), (182, DAYS))  # days before NOW: the age buckets results are given by

SERVICES = [
    "ledger", "payments-api", "refunds-worker", "fraud-scorer", "notifications", "search-indexer",
    "auth-gateway", "billing-cron", "invoice-renderer", "kyc-service", "payout-scheduler", "webhook-relay",
    "risk-engine", "card-vault", "fx-rates", "settlement-batch", "merchant-portal", "disputes-service",
    "reporting-etl", "statement-mailer", "checkout-frontend", "tax-calculator", "subscription-manager",
    "audit-log", "feature-flags", "rate-limiter", "reconciliation-job", "pricing-engine", "chargeback-tracker",
    "loyalty-points",
]
FIRST = ["Marta", "Tomas", "Ana", "Jonas", "Priya", "Kenji", "Lucia", "Omar", "Ingrid", "Felipe", "Aisha",
         "Dmitri", "Chloe", "Ravi", "Sofia", "Mateo", "Yuki", "Hannah", "Kwame", "Elena", "Noah", "Leila",
         "Bruno", "Mei", "Oskar", "Amara", "Viktor", "Nadia", "Pablo", "Greta", "Samir", "Ines", "Lars",
         "Zara", "Emil", "Rosa", "Hugo", "Tara", "Ivan", "Alma"]
LAST = ["Kowalski", "Novak", "Silva", "Berg", "Raman", "Tanaka", "Moretti", "Haddad", "Larsen", "Costa",
        "Bello", "Volkov", "Dubois", "Iyer", "Rossi", "Garcia", "Sato", "Fischer", "Mensah", "Petrova",
        "Walsh", "Karimi", "Lopes", "Chen", "Lind", "Okafor", "Horvat", "Aziz", "Ortega", "Vogel", "Nasser",
        "Pereira", "Holm", "Malik", "Strand", "Vidal", "Lefevre", "Kapoor", "Sokolov", "Rivera"]
CUSTOMERS = ["Northwind Traders", "Acme Logistics", "Bluefin Travel", "Corvid Books", "Dunmore Energy",
             "Elmstead Clinics", "Fjord Outdoor", "Greyhaven Insurance", "Harbor Foods", "Ironbark Tools",
             "Juniper Health", "Kestrel Air", "Lumen Studios", "Mariner Bank", "Nimbus Telecom",
             "Orchard Grocers", "Pinecrest Schools", "Quayside Hotels", "Redwood Realty", "Saffron Kitchens",
             "Tidewater Freight", "Umber Fashion", "Vantage Motors", "Willow Pharmacy", "Yellowstone Parks"]
DATABASES = ["Postgres 15", "Postgres 16", "MySQL 8", "DynamoDB", "Cassandra", "Redis", "CockroachDB", "SQLite"]
REGIONS = ["eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "ap-southeast-1", "sa-east-1"]
TOOLS = ["Argo CD", "Spinnaker", "GitHub Actions", "Jenkins", "Flux", "a manual Helm upgrade"]
LANGUAGES = ["Go 1.22", "Kotlin 2.0", "Python 3.12", "Rust 1.79", "Java 21", "TypeScript 5.4", "Elixir 1.16"]
CITIES = [("Lisbon", "Portugal"), ("Berlin", "Germany"), ("Warsaw", "Poland"), ("Osaka", "Japan"),
          ("Nairobi", "Kenya"), ("Toronto", "Canada"), ("Austin", "Texas"), ("Madrid", "Spain"),
          ("Bangalore", "India"), ("Oslo", "Norway"), ("Manchester", "England"), ("Lyon", "France")]
WEEKDAYS = ["Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays"]
TOPICS = ["Kafka consumer lag", "PCI audits", "Terraform state", "Kubernetes networking", "Postgres vacuuming",
          "OAuth scopes", "currency rounding", "SEPA transfers", "card tokenisation", "load testing",
          "Grafana dashboards", "gRPC deadlines", "feature flag cleanup", "GDPR requests", "iOS push certificates"]
PLANS = ["Enterprise", "Growth", "Starter", "Platform", "Premium"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


@dataclass
class Fact:
    key: str
    text: str
    category: str
    questions: list[tuple[str, str]]  # (kind, question)
    day: int = -1  # days before NOW; set when placed


@dataclass
class Generated:
    memories: list[Fact] = field(default_factory=list)  # in the order written (oldest first)
    questions: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, text, answer key)


def people(rng: random.Random) -> list[str]:
    last = LAST[:]
    rng.shuffle(last)
    return [f"{first} {surname}" for first, surname in zip(FIRST, last)]


def facts(rng: random.Random) -> list[Fact]:
    """Every fact worth asking about, not yet dated."""
    crew = people(rng)
    out: list[Fact] = []

    def add(key: str, text: str, category: str, *questions: tuple[str, str]) -> None:
        out.append(Fact(key, text, category, list(questions)))

    for i, s in enumerate(SERVICES):
        owner, deputy = crew[i % len(crew)], crew[(i * 7 + 3) % len(crew)]
        db, region = rng.choice(DATABASES), rng.choice(REGIONS)
        tool, lang = rng.choice(TOOLS), rng.choice(LANGUAGES)
        other = SERVICES[(i * 11 + 5) % len(SERVICES)]
        budget = rng.choice([50, 80, 120, 200, 300, 450])
        channel = f"#{s.split('-')[0]}-alerts"
        add(f"{s}:owner", f"{owner} leads the team that owns {s}; {deputy} is the second on call.", "entities",
            ("paraphrase", f"Who should I page when {s} breaks?"), ("keyword", f"{s} owner team"))
        add(f"{s}:db", f"{s} keeps its data in {db}, on the db-{s}-0{rng.randint(1, 4)} cluster.", "entities",
            ("paraphrase", f"Which datastore backs {s}?"), ("keyword", f"{s} database cluster"))
        add(f"{s}:region",
            f"{s} runs in {region} with {rng.randint(2, 12)} replicas behind the internal load balancer.",
            "entities", ("paraphrase", f"In which cloud location is {s} hosted?"),
            ("keyword", f"{s} region replicas"))
        add(f"{s}:deploy", f"Releases of {s} go out through {tool}, usually on {rng.choice(WEEKDAYS)}.", "patterns",
            ("paraphrase", f"How do we ship a new version of {s}?"), ("keyword", f"{s} release {tool}"))
        add(f"{s}:lang", f"{s} is written in {lang}; the build image pins that version.", "entities",
            ("paraphrase", f"What programming language is {s} implemented in?"),
            ("keyword", f"{s} written in language version"))
        add(f"{s}:dep", f"{s} calls {other} synchronously for every request, so an outage of {other} stalls it.",
            "entities", ("paraphrase", f"What does {s} depend on that could take it down?"),
            ("inverse", f"Which service stops working when {other} is unavailable?"))
        add(f"{s}:sla", f"The latency budget of {s} is {budget} ms at p99; the SLO dashboard pages above it.",
            "entities", ("paraphrase", f"How quickly is {s} expected to respond?"),
            ("keyword", f"{s} latency budget p99"))
        add(f"{s}:alerts", f"Alerts for {s} are posted to the {channel} channel, not to email.", "patterns",
            ("paraphrase", f"Where do warnings about {s} show up?"), ("keyword", f"{s} alerts channel"))
        add(f"{s}:restart", f"To restart {s} safely, drain it with `kubectl drain-svc {s}` and wait for the "
            "queue to empty before rolling the pods.", "patterns",
            ("paraphrase", f"What's the safe procedure to bounce {s}?"), ("keyword", f"restart {s} drain"))
    for i, p in enumerate(crew):
        first = p.split()[0]
        city, country = CITIES[i % len(CITIES)]
        manager = crew[(i * 3 + 1) % len(crew)]
        topic = TOPICS[i % len(TOPICS)]
        liked, disliked = rng.sample(["Vim", "VS Code", "IntelliJ", "Emacs", "Zed", "Helix"], 2)
        add(f"{p}:city", f"{p} works remotely from {city}, {country}.", "profile",
            ("paraphrase", f"Where is {first} based?"), ("keyword", f"{p} {city}"))
        add(f"{p}:manager", f"{p} reports to {manager} since the team split.", "profile",
            ("paraphrase", f"Who is {p}'s boss?"), ("keyword", f"{p} reports to"))
        add(f"{p}:expert", f"{p} is the go-to person for questions about {topic}.", "profile",
            ("paraphrase", f"Who knows the most about {topic}?"), ("keyword", f"{topic} expert"))
        add(f"{p}:editor", f"{p} prefers {liked} over {disliked} and pairs only in {liked}.", "preferences",
            ("paraphrase", f"Which code editor does {first} like to use?"), ("keyword", f"{p} prefers editor"))
        add(f"{p}:away", f"{p} does not work on {rng.choice(WEEKDAYS)}; plan reviews for other days.", "profile",
            ("paraphrase", f"On which day of the week is {first} unavailable?"), ("keyword", f"{p} day off"))
        add(f"{p}:contact",
            f"{p} would rather be reached by {rng.choice(['a direct message', 'phone', 'email', 'a ticket'])} "
            "than in a public channel.", "preferences",
            ("paraphrase", f"What's the best way to get hold of {first}?"), ("keyword", f"{p} reached by"))
    for c in CUSTOMERS:
        contact = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        add(f"{c}:plan", f"{c} is on the {rng.choice(PLANS)} plan, renewing in {rng.choice(MONTHS)}.", "entities",
            ("paraphrase", f"What subscription tier has {c} bought?"), ("keyword", f"{c} plan renewal"))
        add(f"{c}:contact", f"Our contact at {c} is {contact}, their head of finance.", "entities",
            ("paraphrase", f"Who do we talk to at {c}?"), ("keyword", f"{c} contact"))
        add(f"{c}:compliance", f"{c} requires every export to be encrypted with their own PGP key before upload.",
            "entities", ("paraphrase", f"What security demand does {c} make about exported files?"),
            ("keyword", f"{c} PGP export"))
        add(f"{c}:integration",
            f"{c} integrates through the {rng.choice(['REST', 'SFTP batch', 'webhook', 'GraphQL'])} "
            f"API and sends about {rng.randint(2, 90)} thousand payments a day.", "entities",
            ("paraphrase", f"How does {c} connect to our platform?"), ("keyword", f"{c} integrates API"))
    symptoms = [("timeouts talking to the bank", "raised the connect timeout to 5 s and added a retry with jitter"),
                ("duplicate webhooks", "deduplicated on the event id before processing"),
                ("a memory leak in the worker", "closed the HTTP client per batch instead of per request"),
                ("wrong currency rounding", "rounded half-even in minor units"),
                ("stale cache after deploys", "versioned the cache keys by release"),
                ("deadlocks on the payouts table", "took row locks in id order"),
                ("a full disk on the log volume", "rotated logs hourly and capped them at 2 GB"),
                ("TLS handshake failures", "renewed the intermediate certificate in the trust store"),
                ("slow queries on the reports page", "added a partial index on status and created_at"),
                ("a stuck consumer group", "reset the offsets after pausing the producers")]
    for n in range(260):
        s = SERVICES[n % len(SERVICES)]
        symptom, fix = symptoms[(n * 7) % len(symptoms)]
        code = f"E{rng.randint(1000, 9999)}"
        add(f"case:{n}", f"{s} failed with error {code} ({symptom}); we {fix}.", "cases",
            ("keyword", f"error {code} fix"),
            ("paraphrase", f"How did we solve the {symptom.split(' ', 1)[1] if symptom.startswith('a ') else symptom} "
                           f"problem in {s}?"))
    decisions = [("moved {s} from cron to the job scheduler", "cron jobs overlapped during long runs",
                  "Why did {s} stop using cron?"),
                 ("split {s} into a read and a write path", "reads starved the writes at month end",
                  "What was the reason for separating reads and writes in {s}?"),
                 ("turned off automatic retries in {s}", "retries doubled charges when the bank was slow",
                  "Why doesn't {s} retry failed calls anymore?"),
                 ("adopted contract tests for {s}", "a renamed field broke two clients in production",
                  "Why did {s} start using contract tests?"),
                 ("put {s} behind the rate limiter", "one merchant's batch job saturated it",
                  "What made us throttle traffic to {s}?")]
    for n in range(150):
        s = SERVICES[(n * 13 + 2) % len(SERVICES)]
        action, reason, question = decisions[n % len(decisions)]
        add(f"decision:{n}", f"We {action.format(s=s)} because {reason}.", "events",
            ("paraphrase", question.format(s=s)), ("keyword", f"{s} {action.format(s=s).split()[0]} decision"))
    events = [("migrated {s} to the new Kubernetes cluster", "move {s} onto the new cluster"),
              ("ran the disaster recovery drill for {s}", "rehearse a disaster recovery of {s}"),
              ("rotated the API keys of {s}", "change the credentials {s} uses"),
              ("had a two-hour outage of {s}", "have {s} down for two hours"),
              ("load-tested {s} at five times peak", "stress {s} with five times the peak traffic"),
              ("upgraded the database of {s}", "put a new database version under {s}"),
              ("passed the security review of {s}", "get {s} through the security review")]
    for n in range(160):
        s = SERVICES[(n * 7 + 1) % len(SERVICES)]
        done, asked = (part.format(s=s) for part in events[n % len(events)])
        add(f"event:{n}", f"Today we {done}; notes are in the incident folder.", "events",
            ("temporal", f"When did we {asked}?"))
    return out


ROUTINE = [
    "Reviewed a pull request in {s}: renamed variables and added a test, nothing else.",
    "Stand-up: {p} is still working on the {s} ticket from yesterday.",
    "The nightly {s} job finished in {m} minutes, as usual.",
    "Paired with {p} on {s} for an hour; no conclusions yet.",
    "Bumped dependencies of {s}; the build passed on the second try.",
    "Answered {p}'s question about the {s} dashboard.",
    "{p} asked for access to the {s} logs; granted read-only.",
    "Cleaned up old branches in the {s} repository.",
]


def generate(seed: int = 20261129, routine: int = 1400) -> Generated:
    """The memories, dated across :data:`DAYS` days, and the questions about them."""
    rng = random.Random(seed)
    found = facts(rng)
    crew = people(random.Random(seed))
    for fact in found:  # as many answers in each age bucket: the last week, month, six months, and older
        low, high = AGES[rng.randrange(len(AGES))]
        fact.day = rng.randrange(low, high)
    for n in range(routine):
        text = ROUTINE[n % len(ROUTINE)].format(s=rng.choice(SERVICES), p=rng.choice(crew), m=rng.randint(3, 90))
        found.append(Fact(f"routine:{n}", text, "general", [], rng.randrange(DAYS)))
    found.sort(key=lambda f: (-f.day, f.key))
    result = Generated(memories=found)
    for fact in found:
        for kind, question in fact.questions:
            result.questions.append((kind, question, fact.key))
    return result


def written(fact: Fact) -> datetime:
    """When ``fact`` was written: its day before :data:`NOW`, at a time of day that depends on its key."""
    minutes = sum(map(ord, fact.key)) % 600
    return NOW - timedelta(days=fact.day, hours=10) + timedelta(minutes=minutes)
