"""Demo act: computed context. A notes app built in 12 tasks with dependencies and structured
handoffs; the last task receives only what its completed dependencies and the knowledge graph say
matters, rendered in the spec's "## Context (Computed)" format, then packed into an assembly.

    from contextwright.demo.tasks_act import run
    run(Engine.open("memory://"), console=None)
"""

from __future__ import annotations

from typing import Any

from ..budget import Budget
from ..engine import Engine

PROJECT = "notes-app"

# (key, name, objective, dependencies, handoff or None to leave the task open)
TASKS: list[tuple[str, str, str, list[str], dict[str, Any] | None]] = [
    (
        "schema",
        "Database schema",
        "Design the database schema for users and notes with a migration in db/migrations/001_init.sql",
        [],
        {
            "summary": "Created users and notes tables; notes.owner_id references users.id.",
            "files_created": [
                {
                    "path": "db/migrations/001_init.sql",
                    "lines": "1-42",
                    "purpose": "users and notes tables, indexes",
                }
            ],
            "patterns_discovered": [
                {
                    "pattern": "One migration file per change, never edit an applied one",
                    "applies_to": ["migration", "schema", "database"],
                    "location": "db/migrations/",
                }
            ],
            "gotchas": [
                {
                    "issue": "SQLite ignores foreign keys unless PRAGMA foreign_keys=ON per connection",
                    "severity": "high",
                    "applies_to": ["database", "schema", "query"],
                }
            ],
            "decisions": [
                {
                    "decision": "Use SQLite in development and PostgreSQL in production",
                    "rationale": "zero setup locally, concurrency in prod",
                    "applies_to": ["database"],
                }
            ],
        },
    ),
    (
        "model",
        "User and Note models",
        "Add the User and Note models in src/models/ over the schema",
        ["schema"],
        {
            "summary": "Models with typed fields; Note.owner loads lazily.",
            "files_created": [
                {"path": "src/models/user.py", "lines": "1-60", "purpose": "User model"},
                {
                    "path": "src/models/note.py",
                    "lines": "1-75",
                    "purpose": "Note model with owner relation",
                },
            ],
            "dependencies_for_next": [
                {"file": "src/models/note.py", "reason": "the Note model every notes endpoint uses"}
            ],
            "patterns_discovered": [
                {
                    "pattern": "Models never commit; the request handler owns the transaction",
                    "applies_to": ["model", "database", "api"],
                    "location": "src/models/",
                }
            ],
            "gotchas": [
                {
                    "issue": "Note.owner lazy-loads: N+1 queries in list views unless you join",
                    "severity": "medium",
                    "applies_to": ["notes", "query", "api"],
                }
            ],
        },
    ),
    (
        "hashing",
        "Password hashing",
        "Hash passwords with argon2 in src/auth/passwords.py",
        ["model"],
        {
            "summary": "argon2id hashing with a rehash-on-login check.",
            "files_created": [
                {
                    "path": "src/auth/passwords.py",
                    "lines": "1-38",
                    "purpose": "hash and verify passwords",
                }
            ],
            "gotchas": [
                {
                    "issue": "Hashing takes ~80 ms; never hash inside a DB transaction",
                    "severity": "medium",
                    "applies_to": ["auth", "password", "login"],
                }
            ],
        },
    ),
    (
        "login",
        "JWT login endpoint",
        "Create POST /api/login that returns a JWT token for valid credentials",
        ["hashing"],
        {
            "summary": "POST /api/login returns a 15-minute access token and a refresh token.",
            "files_created": [
                {
                    "path": "src/api/login.py",
                    "lines": "1-90",
                    "purpose": "login endpoint issuing JWT tokens",
                }
            ],
            "patterns_discovered": [
                {
                    "pattern": "Return errors as {error, fix} JSON with the right status code",
                    "applies_to": ["api", "endpoint", "rest"],
                    "location": "src/api/errors.py",
                }
            ],
            "gotchas": [
                {
                    "issue": "Access tokens expire after 15 minutes; clients must refresh",
                    "severity": "high",
                    "applies_to": ["auth", "token", "jwt", "api"],
                }
            ],
            "open_questions": [
                {
                    "question": "Keep refresh tokens in an httpOnly cookie or in local storage?",
                    "blocking": True,
                    "context": "the web client is exposed to XSS via note previews",
                    "recommendation": "httpOnly, SameSite=strict cookie",
                }
            ],
            "decisions": [
                {
                    "decision": "Sign JWTs with RS256",
                    "rationale": "services verify with the public key only",
                    "applies_to": ["auth", "jwt", "token"],
                }
            ],
        },
    ),
    (
        "middleware",
        "Auth middleware",
        "Add auth middleware in src/api/middleware.py that checks the JWT on every request",
        ["login"],
        {
            "summary": "require_user() decorator; 401 with a fix message on a bad token.",
            "files_created": [
                {
                    "path": "src/api/middleware.py",
                    "lines": "1-55",
                    "purpose": "require_user decorator verifying JWT tokens",
                }
            ],
            "dependencies_for_next": [
                {
                    "file": "src/api/middleware.py",
                    "reason": "wrap every notes route with require_user",
                }
            ],
            "patterns_discovered": [
                {
                    "pattern": "Wrap every route that touches user data with @require_user",
                    "applies_to": ["api", "auth", "route", "notes", "endpoint"],
                    "location": "src/api/middleware.py",
                }
            ],
            "gotchas": [
                {
                    "issue": "Clock skew over 30 s fails exp checks; allow 10 s leeway",
                    "severity": "low",
                }
            ],
        },
    ),
    (
        "notes_api",
        "Notes REST endpoints",
        "Build REST endpoints for notes: list, create, update, delete under /api/notes",
        ["model", "middleware"],
        {
            "summary": "CRUD under /api/notes, scoped to the current user.",
            "files_created": [
                {
                    "path": "src/api/notes.py",
                    "lines": "1-140",
                    "purpose": "notes CRUD endpoints scoped to the owner",
                }
            ],
            "files_modified": [
                {
                    "path": "src/models/note.py",
                    "lines": "20-31",
                    "purpose": "joined owner loading for list queries",
                }
            ],
            "patterns_discovered": [
                {
                    "pattern": "Filter every notes query by owner_id in the query itself, not after",
                    "applies_to": ["notes", "query", "api"],
                    "location": "src/api/notes.py:40-58",
                }
            ],
            "gotchas": [
                {
                    "issue": "PATCH must ignore owner_id in the body or users can steal notes",
                    "severity": "high",
                    "applies_to": ["notes", "api", "endpoint"],
                }
            ],
            "open_questions": [
                {
                    "question": "Soft-delete notes or delete them?",
                    "blocking": False,
                    "context": "undo is a wish, not a requirement",
                    "recommendation": "hard delete for now",
                }
            ],
        },
    ),
    (
        "notes_ui",
        "Notes list page",
        "Build the notes list page component with a create form",
        ["notes_api"],
        {
            "summary": "NotesPage with optimistic create.",
            "files_created": [
                {
                    "path": "web/src/pages/NotesPage.tsx",
                    "lines": "1-120",
                    "purpose": "notes list page and create form",
                }
            ],
            "patterns_discovered": [
                {
                    "pattern": "Pages fetch through useApi(), never fetch() directly",
                    "applies_to": ["ui", "page", "component"],
                    "location": "web/src/hooks/useApi.ts",
                }
            ],
        },
    ),
    (
        "login_ui",
        "Login form",
        "Build the login form page that calls /api/login",
        ["login"],
        {
            "summary": "LoginPage posts credentials and stores the session.",
            "files_created": [
                {
                    "path": "web/src/pages/LoginPage.tsx",
                    "lines": "1-80",
                    "purpose": "login form page",
                }
            ],
            "gotchas": [
                {
                    "issue": "Disable the submit button while posting or users double-submit",
                    "severity": "low",
                    "applies_to": ["ui", "form", "button"],
                }
            ],
        },
    ),
    (
        "rate_limit",
        "Rate-limit login",
        "Rate-limit POST /api/login to 5 attempts per minute per IP",
        ["login"],
        {
            "summary": "Token bucket per IP in Redis.",
            "files_created": [
                {
                    "path": "src/api/ratelimit.py",
                    "lines": "1-48",
                    "purpose": "token bucket rate limiter for the API",
                }
            ],
            "gotchas": [
                {
                    "issue": "Behind the proxy, read the client IP from X-Forwarded-For, not the socket",
                    "severity": "high",
                    "applies_to": ["api", "request", "endpoint"],
                }
            ],
            "decisions": [
                {
                    "decision": "Rate limits live in Redis, not in process memory",
                    "rationale": "several workers serve the API",
                    "applies_to": ["api", "redis"],
                }
            ],
        },
    ),
    (
        "search",
        "Search notes",
        "Add full-text search over notes with a query endpoint GET /api/notes/search",
        ["notes_api"],
        {
            "summary": "FTS index on notes; results ranked by bm25, filtered by owner.",
            "files_created": [
                {"path": "src/api/search.py", "lines": "1-70", "purpose": "notes search endpoint"}
            ],
            "files_modified": [
                {
                    "path": "src/api/notes.py",
                    "lines": "140-160",
                    "purpose": "notes CRUD endpoints, now keeping the search index in sync",
                }
            ],
            "dependencies_for_next": [
                {"file": "src/api/search.py", "reason": "search must respect sharing rules too"}
            ],
            "gotchas": [
                {
                    "issue": "The FTS index is only updated inside the notes endpoints; bulk imports must reindex",
                    "severity": "medium",
                    "applies_to": ["notes", "query", "search"],
                }
            ],
        },
    ),
    (
        "auth_tests",
        "Auth tests",
        "Write tests for login, middleware and token refresh",
        ["middleware"],
        None,
    ),
    (
        "sharing",
        "Share notes",
        "Let users share notes with other users through the notes API; shared notes appear in search results",
        ["notes_api", "search", "auth_tests"],
        None,
    ),
]


def _say(console: Any, text: str) -> None:
    if console is None:
        print(text)
    else:
        console.text(text)


def build(engine: Engine) -> dict[str, str]:
    """Create the 12 tasks and complete the ten that have handoffs; returns key -> task id."""
    ids: dict[str, str] = {}
    engine.register_agent(PROJECT, "dev", "developer")
    for key, name, objective, deps, _ in TASKS:
        ids[key] = engine.tasks.create(
            PROJECT,
            name=name,
            objective=objective,
            dependencies=[ids[d] for d in deps],
            author="lead",
            assignee="dev",
        ).id
    for key, _, _, _, handoff in TASKS:
        if handoff is not None:
            engine.complete_task(PROJECT, ids[key], handoff)
    return ids


def run(engine: Engine, console: Any = None) -> None:
    ids = build(engine)
    done = sum(1 for t in TASKS if t[4] is not None)
    _say(
        console, f"Computed context: {len(TASKS)} tasks, {done} completed with structured handoffs."
    )
    _say(console, "The last task, 'Share notes', depends on Notes REST endpoints, Search notes and")
    _say(console, "Auth tests (still open). Here is what it receives:\n")
    computed = engine.tasks.computed_context(PROJECT, ids["sharing"], debug=True)
    _say(console, computed.render())
    result = engine.assemble(
        PROJECT, "dev", task_id=ids["sharing"], budget=Budget(window=4000, reserve=1000)
    )
    kept = [
        i for i in result.trace.items if "computed" in i["sources"] and i["decision"] != "dropped"
    ]
    _say(
        console,
        f"Packed into an assembly: {result.tokens}/{result.available} tokens; computed items:",
    )
    for item in kept:
        _say(
            console,
            f"  {item['section']:<12} {item['preview'][:60]!r}  <- {'; '.join(item['reasons'])}",
        )
