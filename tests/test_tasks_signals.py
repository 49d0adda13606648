"""extractTaskSignals on real-looking tasks: keywords, technical terms, domains, files, types."""

from __future__ import annotations

import pytest

from contextwright.tasks.signals import (
    DEFAULT_DOMAINS,
    domains_of,
    extract_task_signals,
    is_path,
    split_identifier,
)

# (objective, criteria, keywords that must be there, keywords that must not, domains, files)
CASES = [
    (
        "Add JWT refresh to the useAuth hook in src/app.ts",
        ["Expired tokens are refreshed once"],
        {"jwt", "useauth", "auth", "src/app.ts", "refresh", "tokens"},
        {"the", "to", "add", "in"},
        {"auth"},
        ["src/app.ts"],
    ),
    (
        "Create a REST endpoint GET /api/users/:id returning the user record",
        ["Returns 404 when the user does not exist"],
        {"rest", "endpoint", "users", "record", "404"},
        {"a", "when", "does"},
        {"api", "database"},
        ["api/users"],
    ),
    (
        "Write a migration that adds an index on orders.created_at",
        ["The migration is reversible", "Query plan uses the index"],
        {"migration", "orders.created_at", "index", "query", "reversible"},
        {"that", "an", "is"},
        {"database"},
        [],
    ),
    (
        "Fix the LoginForm component so the submit button is disabled while posting",
        [],
        {"loginform", "login", "form", "component", "submit", "button", "disabled"},
        {"so", "while", "is"},
        {"auth", "ui"},
        [],
    ),
    (
        "Increase test coverage of payments/service.py to 90% with pytest mocks",
        ["CI fails below 90%"],
        {"test", "coverage", "payments/service.py", "pytest", "mocks", "ci"},
        {"of", "with", "to"},
        {"testing"},
        ["payments/service.py"],
    ),
    (
        "Refactor user_profile_view in views.py to use the ProfileSerializer",
        [],
        {"user_profile_view", "profile", "views.py", "profileserializer", "serializer"},
        {"use", "in", "the"},
        set(),
        ["views.py"],
    ),
    (
        "Add GraphQL resolver for Query.orders and document it in docs/api.md",
        ["Schema snapshot updated"],
        {"graphql", "resolver", "query.orders", "docs/api.md", "schema", "snapshot"},
        {"for", "and", "it"},
        {"api", "database"},
        ["docs/api.md"],
    ),
    (
        "Rate-limit POST /login to 5 attempts per minute per IP",
        ["Returns 429 with Retry-After"],
        {"rate-limit", "rate", "limit", "post", "login", "attempts", "ip", "429", "retry-after"},
        {"to", "per", "with"},
        {"auth"},
        [],
    ),
    (
        "Store sessions in Redis instead of memory (see config/redis.yml)",
        [],
        {"sessions", "redis", "memory", "config/redis.yml"},
        {"in", "of", "see"},
        {"auth"},
        ["config/redis.yml"],
    ),
    (
        "Style the settings page with Tailwind; dark mode toggle in Header.tsx",
        ["Toggle persists across reloads"],
        {"style", "settings", "page", "tailwind", "dark", "header.tsx", "toggle", "persists"},
        {"the", "with", "across"},
        {"ui"},
        ["Header.tsx"],
    ),
    (
        "Upgrade to Node 20 and fix e.g. the OpenSSL errors in the build, v1.2.3 pins",
        [],
        {"upgrade", "node", "20", "openssl", "errors", "build", "v1.2.3"},
        {"e.g", "to", "and"},
        set(),
        [],
    ),
    (
        "Password reset emails: send a one-time token via SES, expire after 30 minutes",
        ["Token single use", "Email template in templates/reset.html"],
        {
            "password",
            "reset",
            "emails",
            "one-time",
            "token",
            "ses",
            "expire",
            "templates/reset.html",
        },
        {"a", "via", "after"},
        {"auth"},
        ["templates/reset.html"],
    ),
    (
        "Assert the CSV exporter escapes quotes; add spec for exporter.rb",
        [],
        {"assert", "csv", "exporter", "escapes", "quotes", "spec", "exporter.rb"},
        {"the", "for", "add"},
        {"testing"},
        ["exporter.rb"],
    ),
    (
        "Model the Invoice schema with SQLAlchemy and a Alembic migration",
        [],
        {"model", "invoice", "schema", "sqlalchemy", "alembic", "migration"},
        {"the", "with", "and", "a"},
        {"database"},
        [],
    ),
    (
        "Ping @bob about the flaky test in tests/test_checkout.py",
        [],
        {"ping", "flaky", "test", "tests/test_checkout.py", "checkout"},
        {"bob", "@bob", "about"},
        {"testing"},
        ["tests/test_checkout.py"],
    ),
]


@pytest.mark.parametrize(("objective", "criteria", "want", "unwanted", "domains", "files"), CASES)
def test_signals_on_real_tasks(
    objective: str,
    criteria: list[str],
    want: set[str],
    unwanted: set[str],
    domains: set[str],
    files: list[str],
) -> None:
    s = extract_task_signals(objective, criteria, "feature")
    missing = want - set(s.keywords)
    assert not missing, f"missing {missing} in {s.keywords}"
    assert not unwanted & set(s.keywords)
    assert set(s.domains) == domains
    assert list(s.files_mentioned) == files
    assert s.task_types == ("feature",)
    assert all(k == k.lower() for k in s.keywords)
    assert len(s.keywords) == len(set(s.keywords))


def test_mentions_are_not_keywords_but_are_kept() -> None:
    s = extract_task_signals("Ask @carol to review the auth flow", [])
    assert s.mentions == ("carol",)
    assert "carol" not in s.keywords


def test_keywords_keep_first_occurrence_order_and_are_deterministic() -> None:
    a = extract_task_signals("cache the login token; the token cache", [])
    assert a.keywords[:3] == ("cache", "login", "token")
    assert a == extract_task_signals("cache the login token; the token cache", [])


def test_domain_mapping_is_configurable() -> None:
    mapping = {"billing": ("invoice", "payment"), "auth": ("login",)}
    s = extract_task_signals("Send the invoice after login", [], domains=mapping)
    assert s.domains == ("billing", "auth")
    assert domains_of(["tokens"], DEFAULT_DOMAINS) == ["auth"]  # plurals count
    assert domains_of(["api"], DEFAULT_DOMAINS) == ["api"]  # the domain's own name counts


def test_no_type_means_no_task_types_and_empty_text_means_nothing() -> None:
    s = extract_task_signals("", [], None)
    assert s.keywords == () and s.domains == () and s.files_mentioned == () and s.task_types == ()


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("src/app.ts", True),
        ("README.md", True),
        ("lib/auth/", True),
        ("e.g", False),
        ("v1.2.3", False),
        ("U.S", False),
        ("https://example.com/x", False),
        ("orders.created_at", False),
    ],
)
def test_is_path(token: str, expected: bool) -> None:
    assert is_path(token) is expected


def test_split_identifier() -> None:
    assert split_identifier("useAuth") == ["use", "auth"]
    assert split_identifier("HTTPServerError") == ["http", "server", "error"]
    assert split_identifier("user_id") == ["user", "id"]
