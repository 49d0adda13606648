"""The demo's project: a product team (researcher, developer, reviewer, PM) shipping "checkout v2"
over five simulated days, replayed into a store as records.

The storyline is scripted (decisions that are later superseded, questions and their answers,
handoffs, pinned constraints, a private note); the day-to-day chatter around it comes from a seeded
generator, so the same seed always gives the same records, ids and timestamps.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..engine import Engine

PROJECT = "checkout"
# Monday 2 March 2026, 09:00 UTC; the demo's clock stops on Friday at 19:00 UTC.
START = 1_772_442_000.0
DAY = 86_400.0
DAYS = 5
NOW = START + (DAYS - 1) * DAY + 10 * 3600.0
TEAM = {"rhea": "researcher", "dev": "developer", "rex": "reviewer", "pam": "pm"}


def clock() -> float:
    """The engine's clock during the demo: Friday 19:00 UTC of the simulated week."""
    return NOW


@dataclass
class Replay:
    """What the scenario wrote, for the acts that show it and the tests that check it."""

    records: int = 0
    ids: dict[str, str] = field(default_factory=dict)  # storyline name -> record id
    superseded: list[str] = field(default_factory=list)
    private: list[str] = field(default_factory=list)
    direct: dict[str, tuple[str, ...]] = field(default_factory=dict)  # id -> recipients
    kinds: dict[str, int] = field(default_factory=dict)


CHATTER = {
    "rhea": [
        "Reading how two providers document {topic}, to compare their defaults.",
        "Notes on {topic}: most teams cap it and log every attempt.",
        "Found an RFC section that covers {topic}; summarising it for the team.",
        "@dev last quarter's numbers on {topic} are in the research folder.",
        "Interview notes: merchants complain about {topic} more than about latency.",
        "Two of five merchants I talked to had incidents caused by {topic}.",
        "Drafting the comparison table for {topic}; one provider is missing data.",
        "Support tickets tagged {topic} went from 14 to 9 this month.",
    ],
    "dev": [
        "Working on {topic}; the checkout-api tests pass locally.",
        "Pushed a WIP branch for {topic}, not ready for review yet.",
        "The change for {topic} touches the session middleware and the payments client.",
        "@rex small question on {topic}: is a feature flag enough for the rollout?",
        "Refactored the helper for {topic} so that it can be tested without the network.",
        "Profiled {topic}: 3 ms p95 on staging, fine for now.",
        "Renamed the config keys for {topic}; the old names still work until 2.5.",
        "Paired with rhea on {topic} for half an hour; plan unchanged.",
    ],
    "rex": [
        "Reviewed the diff for {topic}: naming is fine, error handling needs one more pass.",
        "Left comments on {topic}; the retry path has no test.",
        "@dev please add a regression test for {topic} before we merge.",
        "Checked {topic} against the security checklist: no blockers.",
        "The metrics for {topic} look right in staging.",
        "Approved the small fix for {topic}.",
        "Logs for {topic} contain an email address; masked it in the formatter.",
        "Nothing from me on {topic} until the tests are green.",
    ],
    "pam": [
        "Customer call: they asked again about {topic}.",
        "Updated the release board: {topic} is in progress.",
        "@rhea can you add {topic} to Thursday's research summary?",
        "Finance wants a one-line status on {topic} by end of day.",
        "Moved {topic} to the top of the backlog after the support review.",
        "Sales asked whether {topic} can be announced on Friday.",
        "Legal reviewed {topic}; no change needed on our side.",
        "Wrote the changelog entry for {topic}.",
    ],
}
TOPICS = [
    "refresh-token rotation",
    "webhook retries",
    "EU invoices",
    "idempotency keys",
    "session expiry",
    "the payments client",
    "rate limiting",
    "the VAT field",
    "token revocation",
    "checkout latency",
    "the receipt emails",
    "currency rounding",
    "the fraud score",
    "3-D Secure prompts",
]


def search_results(query: str, rng: random.Random) -> str:
    """A web-search tool result: long, as real ones are."""
    sites = ["stripe.com/docs", "docs.adyen.com", "developer.paypal.com", "rfc-editor.org"]
    lines = [f"Results for {query!r}:"]
    for i in range(8):
        site = rng.choice(sites)
        lines.append(f"{i + 1}. {site}/{query.replace(' ', '-')}-{rng.randint(10, 99)}")
        lines.append(
            f"   {query.capitalize()} is retried with exponential backoff; providers document "
            f"between {rng.randint(3, 8)} and {rng.randint(9, 16)} attempts over "
            f"{rng.choice(['24 hours', '3 days', '72 hours'])}. Idempotency keys make a retried "
            "delivery safe. Failed deliveries are visible in the dashboard and can be replayed."
        )
    return "\n".join(lines)


def runner_output(rng: random.Random, failing: str | None) -> str:
    """A test-runner tool result: long, with the one line that matters buried inside."""
    tests = [
        "test_rotates_on_use",
        "test_reuse_revokes_family",
        "test_expiry_uses_server_clock",
        "test_webhook_backoff",
        "test_invoice_has_vat_id",
        "test_idempotent_capture",
        "test_rate_limit_headers",
    ]
    lines = ["============ test session starts ============", "collected 412 items", ""]
    for i in range(60):
        name = rng.choice(tests)
        module = rng.choice(["test_refresh", "test_webhooks", "test_invoices", "test_payments"])
        status = "FAILED" if failing and name == failing and i % 7 == 0 else "PASSED"
        lines.append(f"tests/{module}.py::{name}[{i}] {status}")
    if failing:
        lines.append(f"FAILED tests/test_refresh.py::{failing} - AssertionError: token reused")
        lines.append("============ 1 failed, 411 passed in 38.2s ============")
    else:
        lines.append("============ 412 passed in 37.9s ============")
    return "\n".join(lines)


class _Writer:
    """Buffers one day's records and gives each a deterministic id and timestamp."""

    def __init__(self, engine: Engine, out: Replay) -> None:
        self.engine = engine
        self.out = out
        self.seq = 0
        self.at = START
        self.batch: list[dict[str, Any]] = []
        self.after: list[Callable[[], object]] = []

    def add(self, author: str, kind: str, content: str, **fields: Any) -> str:
        self.seq += 1
        self.at += 60.0 + (self.seq * 37) % 240  # a few minutes apart
        rid = f"ck-{self.seq:05d}"
        session = fields.pop("session", f"{author}-day{int((self.at - START) // DAY) + 1}")
        self.batch.append(
            {
                "id": rid,
                "project": PROJECT,
                "author": author,
                "kind": kind,
                "content": content,
                "created_at": self.at,
                "session": session,
                **fields,
            }
        )
        self.out.kinds[kind] = self.out.kinds.get(kind, 0) + 1
        if fields.get("visibility") == "private":
            self.out.private.append(rid)
        if fields.get("visibility") == "direct":
            self.out.direct[rid] = tuple(fields["to"])
        return rid

    def tool(self, author: str, name: str, arguments: dict[str, Any], result: str) -> str:
        call = self.add(
            author,
            "tool_call",
            f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})",
            meta={"name": name, "arguments": arguments},
        )
        self.add(author, "tool_result", result, reply_to=call, meta={"name": name})
        return call

    def day(self, n: int) -> None:
        """Move the clock to 09:00 of day `n` (0-based)."""
        self.at = max(self.at, START + n * DAY)

    def flush(self) -> None:
        self.engine.add_many(self.batch)
        self.out.records += len(self.batch)
        self.batch = []
        for fn in self.after:
            fn()
        self.after = []


def _chatter(w: _Writer, rng: random.Random, day: int, per_agent: int) -> None:
    for _ in range(per_agent):
        for agent in TEAM:
            text = rng.choice(CHATTER[agent]).format(topic=rng.choice(TOPICS))
            roll = rng.random()
            if roll < 0.07:
                peer = rng.choice([a for a in TEAM if a != agent])
                w.add(agent, "message", f"(DM) {text}", to=[peer], visibility="direct")
            elif roll < 0.22 and agent in ("rhea", "dev"):
                if agent == "rhea":
                    q = rng.choice(TOPICS)
                    w.tool(agent, "web_search", {"query": q}, search_results(q, rng))
                else:
                    w.tool(agent, "run_tests", {"path": "tests/"}, runner_output(rng, None))
            elif roll < 0.3:
                w.add(agent, "note", text)
            else:
                w.add(agent, "message", text)


def replay(engine: Engine, *, seed: int = 7, chatter: int = 26) -> Replay:
    """Write the whole week into `engine` (about 110 records a day with the default chatter)."""
    rng = random.Random(seed)
    out = Replay()
    for agent, role in TEAM.items():
        engine.register_agent(PROJECT, agent, role)
    w = _Writer(engine, out)
    ids = out.ids

    # -- Monday: kickoff, constraints, the first token decision --------------------------------
    w.day(0)
    ids["eu"] = w.add(
        "pam",
        "constraint",
        "EU data residency: customer PII never leaves the eu-west-1 region, in logs included.",
        pinned=True,
    )
    ids["deps"] = w.add(
        "pam",
        "constraint",
        "No new runtime dependency without a review from @rex.",
        pinned=True,
    )
    ids["freeze"] = w.add(
        "pam",
        "state",
        "Release 2.4 (checkout v2) ships Friday; code freeze Thursday 18:00 UTC.",
        pinned=True,
    )
    w.add(
        "pam",
        "message",
        "Kickoff for the week: checkout v2 ships Friday with refresh-token rotation, EU invoices "
        "and a retry policy for payment webhooks. Tasks are on the board.",
        session="pam-standup",
    )
    ids["t_rotation"] = w.add(
        "pam", "task", "Implement refresh-token rotation in the checkout API.", to=["dev"]
    )
    ids["t_retries"] = w.add(
        "pam",
        "task",
        "Research how payment providers retry webhooks; recommend a policy.",
        to=["rhea"],
    )
    ids["t_review"] = w.add(
        "pam", "task", "Review the session-token design before Wednesday.", to=["rex"]
    )
    ids["d_jwt"] = w.add(
        "dev",
        "decision",
        "Session tokens are JWTs signed with RS256 and expire after 24 hours.",
        tags=["auth"],
    )
    ids["q_hash"] = w.add(
        "rhea", "question", "@dev do we store refresh tokens hashed or encrypted at rest?"
    )
    ids["a_hash"] = w.add(
        "dev",
        "message",
        "Hashed (SHA-256 with a per-token salt); we never need the plain value back.",
        reply_to=ids["q_hash"],
    )
    w.after.append(lambda: engine.resolve(PROJECT, ids["q_hash"], by="dev", note="answered"))
    w.tool(
        "rhea",
        "web_search",
        {"query": "payment webhook retry policy"},
        search_results("payment webhook retry policy", rng),
    )
    _chatter(w, rng, 0, chatter)
    w.flush()

    # -- Tuesday: research handoff, review pushback, a gotcha ------------------------------------
    w.day(1)
    ids["d_retry6"] = w.add(
        "rhea",
        "decision",
        "Webhook retries: exponential backoff with full jitter, 6 attempts within 24 hours.",
        tags=["webhooks"],
    )
    ids["h_research"] = w.add(
        "rhea",
        "handoff",
        "@dev handing off the webhook research: every provider retries with backoff, all of them "
        "require idempotency keys, and merchants want failed deliveries replayable. Policy in "
        "the decision log; sources in my search results.",
        to=["dev"],
    )
    ids["review_jwt"] = w.add(
        "rex",
        "message",
        "@dev a 24-hour JWT cannot be revoked when a laptop is stolen. I would rather see opaque "
        "tokens stored server side with a short expiry.",
    )
    ids["gotcha_clock"] = w.add(
        "rex",
        "gotcha",
        "The staging clock runs 90 s ahead: expiry tests that compare with wall time flake. Use "
        "the server clock fixture.",
    )
    ids["q_rotate"] = w.add(
        "dev",
        "question",
        "Should refresh tokens rotate on every use, or once a day?",
        to=["rex"],
        visibility="direct",
    )
    ids["a_rotate"] = w.add(
        "rex",
        "message",
        "On every use, with reuse detection; daily rotation leaves a day-long replay window.",
        to=["dev"],
        visibility="direct",
        reply_to=ids["q_rotate"],
    )
    w.after.append(lambda: engine.resolve(PROJECT, ids["q_rotate"], by="rex"))
    w.tool("dev", "run_tests", {"path": "tests/test_refresh.py"}, runner_output(rng, None))
    _chatter(w, rng, 1, chatter)
    w.flush()

    # -- Wednesday: the token decision changes; finance changes the retry policy ------------------
    w.day(2)
    ids["d_opaque"] = w.add(
        "rex",
        "decision",
        "Session tokens are opaque, stored server side, expire after 1 hour, and are renewed with "
        "refresh tokens that rotate on every use.",
        supersedes=ids["d_jwt"],
        tags=["auth"],
    )
    ids["d_retry8"] = w.add(
        "pam",
        "decision",
        "Webhook retries: 8 attempts over 72 hours, so that weekend outages are covered "
        "(finance asked).",
        supersedes=ids["d_retry6"],
        tags=["webhooks"],
    )
    out.superseded += [ids["d_jwt"], ids["d_retry6"]]
    w.add(
        "pam",
        "message",
        "Can you sign off the token design by Thursday noon?",
        to=["rex"],
        visibility="direct",
    )
    ids["q_vat"] = w.add(
        "pam",
        "question",
        "Do EU invoices need the customer's VAT id printed on the PDF, or only stored?",
    )
    ids["pr42"] = w.add(
        "dev",
        "artifact",
        "PR #42 (checkout-api): opaque session tokens, refresh-token rotation on every use, "
        "token families for reuse detection.",
        tags=["pr-42", "auth"],
    )
    _chatter(w, rng, 2, chatter)
    w.flush()

    # -- Thursday: review, a race condition, freeze ------------------------------------------------
    w.day(3)
    ids["h_pr42"] = w.add(
        "dev",
        "handoff",
        "@rex PR #42 is ready for review: rotation and reuse detection are in, 412 tests pass, "
        "the expiry tests use the server clock fixture.",
        to=["rex"],
    )
    ids["gotcha_race"] = w.add(
        "rex",
        "gotcha",
        "Refresh race: two tabs that refresh at the same moment invalidate each other's token "
        "family and log the user out.",
    )
    ids["t_race"] = w.add(
        "pam",
        "task",
        "Fix the refresh race when two browser tabs refresh at once (blocks the release).",
        to=["dev"],
    )
    w.tool(
        "dev",
        "run_tests",
        {"path": "tests/test_refresh.py", "k": "two_tabs"},
        runner_output(rng, "test_reuse_revokes_family"),
    )
    w.add(
        "pam",
        "message",
        "Reminder to everyone: code freeze today at 18:00 UTC. Anything not merged moves to 2.5.",
        session="pam-standup",
    )
    _chatter(w, rng, 3, chatter)
    w.flush()

    # -- Friday: the fix, the last decision, a private note ----------------------------------------
    w.day(4)
    ids["d_grace"] = w.add(
        "rex",
        "decision",
        "Reuse detection allows a 10-second grace period for the previous refresh token, so that "
        "concurrent tabs do not revoke the family.",
        tags=["auth"],
    )
    w.tool(
        "dev",
        "read_file",
        {"path": "checkout/auth/refresh.py"},
        "\n".join(
            f"{n:4d}  {line}"
            for n, line in enumerate(
                [
                    "def rotate(family, presented, now):",
                    "    current = family.current()",
                    "    if presented == current.token:",
                    "        return family.issue(now)",
                    "    if presented == family.previous().token and now - family.rotated_at < GRACE:",
                    "        return current  # a concurrent tab: hand back the token just issued",
                    "    family.revoke(reason='reuse')",
                    "    raise TokenReused(family.id)",
                ]
                * 6,
                start=1,
            )
        ),
    )
    ids["private"] = w.add(
        "pam",
        "note",
        "If the VAT question is still open on Monday, move EU invoices to release 2.5.",
        visibility="private",
    )
    ids["q_metrics"] = w.add(
        "rhea",
        "question",
        "@pam which success metric goes in the release note: conversion or checkout latency?",
    )
    w.add(
        "pam",
        "message",
        "Conversion first, latency second; both from the EU dashboard.",
        reply_to=ids["q_metrics"],
    )
    w.after.append(lambda: engine.resolve(PROJECT, ids["q_metrics"], by="pam"))
    _chatter(w, rng, 4, chatter // 2)
    w.flush()
    return out
