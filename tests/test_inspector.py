"""The inspector page in real headless Chromium (Debian's, never a downloaded one), against real
uvicorn on 127.0.0.1: the main flows are clicked through, and screenshots are taken (into docs/img/
with UPDATE_SCREENSHOTS=1)."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from contextwright import Engine
from contextwright.server import create_app
from contextwright.settings import Settings
from servers import running

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# `UPDATE_SCREENSHOTS=1 make test` refreshes the README's pictures; otherwise they go to a temp dir,
# so that a test run never changes tracked files.
IMG = (
    Path(__file__).resolve().parent.parent / "docs" / "img"
    if os.environ.get("UPDATE_SCREENSHOTS") == "1"
    else Path(tempfile.mkdtemp(prefix="cw-screens-"))
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian chromium (make test)"),
]


def seed(engine: Engine) -> None:
    engine.register_agent("acme", "bob", "developer")
    engine.register_agent("acme", "carol", "reviewer")
    add = engine.add
    add(
        project="acme",
        author="carol",
        kind="decision",
        content="Sessions use short-lived JWTs (15 min) with refresh tokens in httpOnly cookies.",
    )
    add(
        project="acme",
        author="alice",
        kind="gotcha",
        tags=["auth"],
        content="The login handler caches the user for 5 minutes; invalidate it on logout.",
    )
    add(
        project="acme",
        author="alice",
        kind="constraint",
        content="Never log tokens or passwords, not even at debug level.",
    )
    add(
        project="acme",
        author="alice",
        content="@bob the login bug: users are logged out after 60s. Can you fix it?",
    )
    add(
        project="acme",
        author="dave",
        kind="question",
        content="Should refresh tokens rotate on every use?",
    )
    add(
        project="acme",
        author="alice",
        kind="note",
        visibility="private",
        content="Private: I suspect the clock skew on the auth server.",
    )
    for i in range(30):
        add(
            project="acme",
            author="bob" if i % 2 else "alice",
            session="s1",
            content=f"Turn {i}: looked at auth middleware, token expiry and the refresh flow ({i}).",
        )
    add(
        project="acme",
        author="bob",
        kind="tool_result",
        session="s1",
        content="pytest tests/test_login.py: 3 failed, 12 passed (TokenExpired at auth.py:88)",
    )


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("inspector") / "inspector.db"
    engine = Engine.open(f"sqlite:///{db}")
    seed(engine)
    with running(create_app(engine, Settings())) as url:
        yield url
    engine.close()


@pytest.fixture(scope="module")
def page(base: str) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1360, "height": 900})
        pg = context.new_page()
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(f"{base}/")
        pg.wait_for_selector("body[data-ready='1']")
        yield pg
        assert errors == []
        browser.close()


def assemble(
    pg: object, agent: str, task: str, budget: int, session: str = "", fmt: str = "openai"
) -> str:
    from playwright.sync_api import Page

    assert isinstance(pg, Page)
    before = pg.evaluate("document.body.dataset.trace || ''")
    pg.select_option("#format", fmt)
    pg.fill("#project", "acme")
    pg.fill("#agent", agent)
    pg.fill("#task", task)
    pg.fill("#budget", str(budget))
    pg.fill("#session", session)
    pg.click("#assemble")
    pg.wait_for_function(
        f"document.body.dataset.trace && document.body.dataset.trace !== '{before}'"
    )
    return str(pg.evaluate("document.body.dataset.trace"))


def test_window_sections_and_gauge(page: object) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    assert page.input_value("#project") == "acme"
    assemble(page, "bob", "fix the login bug where users are logged out", 900, session="s1")
    expect(page.locator("#gauge")).to_be_visible()
    expect(page.locator("#session-gauge")).to_contain_text("Session s1")
    expect(page.locator("#session-gauge")).to_contain_text("70%")
    expect(page.locator("#gauge-text")).to_contain_text("/ 900 tokens")
    sections = page.locator("details.section")
    assert sections.count() >= 3
    state = page.locator("details.section[data-section='state'] summary")
    expect(state).to_contain_text("tokens")
    expect(page.locator("#sections")).to_contain_text("login bug")
    expect(page.locator("#sections")).not_to_contain_text("clock skew")  # alice's private note
    assert page.locator("ol.items .tok").first.inner_text().endswith("tok")
    # A knowledge line is shown without its date; the item says the day it is shown under.
    knowledge = page.locator("details.section[data-section='knowledge'] ol.items")
    expect(knowledge).to_contain_text("under ")
    page.screenshot(path=str(IMG / "inspector-window.png"), full_page=False)


def test_kept_and_dropped_with_reasons(page: object) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    assemble(page, "bob", "fix the login bug where users are logged out", 400)
    page.click("#tabs button[data-tab=items]")
    rows = page.locator("#items tbody tr")
    assert rows.count() > 5
    page.check("input[name=decision][value=dropped]")
    expect(page.locator("#items tbody tr.dropped").first).to_be_visible()
    assert page.locator("#items tbody tr:not(.dropped)").count() == 0
    first = page.locator("#items tbody tr").first
    expect(first.locator("td").nth(6)).to_contain_text("=")  # score components
    expect(first.locator("td").nth(7)).not_to_be_empty()  # the reason
    page.check("input[name=decision][value=all]")
    page.screenshot(path=str(IMG / "inspector-items.png"))


def test_source_latency(page: object) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    page.click("#tabs button[data-tab=sources]")
    expect(page.locator("#latency")).to_contain_text("ms")
    assert page.locator("#sources tbody tr").count() >= 3
    expect(page.locator("#sources tbody tr[data-source=fulltext]")).to_be_visible()
    page.screenshot(path=str(IMG / "inspector-sources.png"))


def test_compare_two_assemblies(page: object) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    a = assemble(page, "bob", "fix the login bug", 2000)
    b = assemble(page, "carol", "review the login fix", 2000)
    page.click("#tabs button[data-tab=compare]")
    page.fill("#agent", "")
    page.click("#refresh-traces")
    page.wait_for_selector(f"#trace-a option[value='{a}']", state="attached")
    page.select_option("#trace-a", a)
    page.select_option("#trace-b", b)
    page.click("#compare")
    out = page.locator("#compare-out")
    expect(out).to_contain_text("Request changes")
    expect(out).to_contain_text("agent")
    expect(out.locator("table.diff")).to_be_visible()
    page.screenshot(path=str(IMG / "inspector-compare.png"))


def test_replay_with_another_budget(page: object) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    trace = assemble(page, "bob", "fix the login bug where users are logged out", 3000)
    page.click("#tabs button[data-tab=replay]")
    expect(page.locator("#replay-of")).to_have_text(trace)
    page.fill("#replay-budget", "250")
    page.click("#replay")
    out = page.locator("#replay-out")
    expect(out).to_contain_text("available 3000 → 250")
    expect(out.locator("table.diff tbody tr").first).to_be_visible()
    expect(out.locator(".badge.dropped").first).to_be_visible()
    page.screenshot(path=str(IMG / "inspector-replay.png"))


def test_replay_rejects_bad_rules_with_the_field(page: object) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    page.click("#tabs button[data-tab=replay]")
    page.fill("#replay-rules", '[{"rules": [{"name": "x"}]}]')
    page.click("#replay")
    expect(page.locator("#error")).to_contain_text("422")
    page.fill("#replay-rules", "")


def test_replay_with_a_changed_pipeline(page: object) -> None:
    """The spec's troubleshooting, in the inspector: the sources tab names the definition behind
    each source; a one-line change of a pipeline, replayed, shows what it changes."""
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    assemble(page, "bob", "fix the login bug where users are logged out", 3000)
    page.click("#tabs button[data-tab=sources]")
    expect(page.locator("#sources tr[data-source=fulltext]")).to_contain_text("default · sha256:")
    page.click("#tabs button[data-tab=replay]")
    page.fill("#replay-budget", "3000")
    page.fill("#replay-pipelines", '[{"name": "fulltext", "steps": [{"step": "fulltext", '
              '"topK": 10}, {"step": "filter", "kind": ["gotcha"]}]}]')  # fmt: skip
    page.click("#replay")
    out = page.locator("#replay-out")
    expect(out).to_contain_text("pipelines")
    page.fill(
        "#replay-pipelines", '[{"name": "fulltext", "steps": [{"step": "fulltext", "topK": 0}]}]'
    )
    page.click("#replay")
    expect(page.locator("#error")).to_contain_text("topK")
    page.fill("#replay-pipelines", "")


def test_browse_records_with_filters(page: object) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    page.click("#tabs button[data-tab=records]")
    page.fill("#rf-agent", "bob")
    page.fill("#rf-kind", "decision")
    page.click("#browse")
    rows = page.locator("#records tbody tr")
    expect(rows.first).to_contain_text("decision")
    assert rows.count() == 1
    page.fill("#rf-kind", "")
    page.fill("#rf-limit", "100")
    page.click("#browse")
    expect(page.locator("#records tbody")).not_to_contain_text("clock skew")
    page.fill("#rf-agent", "alice")
    page.click("#browse")
    expect(page.locator("#records tbody")).to_contain_text("clock skew")
    page.fill("#rf-agent", "bob")
    page.click("#browse")
    page.screenshot(path=str(IMG / "inspector-records.png"))


JWT_DECISION = "Sessions use short-lived JWTs (15 min) with refresh tokens in httpOnly cookies."


def test_clicking_an_item_opens_its_record_score_and_reasons(page: object) -> None:
    """Clicking an item did nothing. Now a window item opens its record (all of it, every
    field) with its decision, full score, every score component and every reason; so does a row
    of Kept & dropped, dropped ones included, and a row of Records."""
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    trace_id = assemble(page, "bob", "fix the login bug where users are logged out", 3000)
    page.click("#tabs button[data-tab=window]")
    page.locator("#sections li", has_text="short-lived JWTs").first.click()
    dialog = page.locator("#detail")
    expect(dialog).to_be_visible()
    expect(dialog.locator("pre.content")).to_have_text(JWT_DECISION)
    expect(dialog.locator(".record")).to_contain_text("carol")
    expect(dialog.locator(".record")).to_contain_text("decision")
    expect(dialog).to_contain_text("kept")
    trace = httpx.get(
        f"{page.url.split('/inspector')[0]}/v1/projects/acme/traces/{trace_id}"
    ).json()
    item = next(i for i in trace["items"] if JWT_DECISION[:40] in i["preview"])
    shown = dialog.locator("table.components tr")
    assert shown.count() == len(item["components"]) > 0
    for name, value in item["components"].items():
        cell = dialog.locator(f"tr[data-component='{name}'] td").nth(1)
        assert float(cell.inner_text()) == value
    expect(dialog.locator(".reasons-list li")).to_have_count(len(item["reasons"]))
    score = dialog.locator("table.kv tr", has_text="score").locator("td")
    assert float(score.inner_text()) == item["score"]
    page.screenshot(path=str(IMG / "inspector-detail.png"))
    page.click("#detail-close")
    expect(dialog).to_be_hidden()

    assemble(page, "bob", "fix the login bug where users are logged out", 400)
    page.click("#tabs button[data-tab=items]")
    page.check("input[name=decision][value=dropped]")
    row = page.locator("#items tbody tr.dropped").first
    reason = row.locator("td").nth(7).inner_text()
    row.click()
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("dropped")
    expect(dialog).to_contain_text(reason)
    page.click("#detail-close")
    page.check("input[name=decision][value=all]")

    page.click("#tabs button[data-tab=records]")
    page.fill("#rf-agent", "bob")
    page.fill("#rf-kind", "decision")
    page.click("#browse")
    page.locator("#records tbody tr").first.click()
    expect(dialog.locator("pre.content")).to_have_text(JWT_DECISION)
    page.click("#detail-close")
    page.fill("#rf-kind", "")


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "markdown"])
def test_payload_view_shows_exactly_what_would_be_sent(page: object, base: str, fmt: str) -> None:
    """The Payload tab shows the Assembly's payload as it would be sent: the same JSON (or text)
    that the HTTP API answers for the same request."""
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    task = "fix the login bug where users are logged out"
    assemble(page, "bob", task, 6000, fmt=fmt)
    page.click("#tabs button[data-tab=payload]")
    expect(page.locator("#payload-info")).to_contain_text(fmt)
    shown = page.locator("#payload").inner_text()
    body = {"agent": "bob", "task": task, "format": fmt, "budget": 6000}
    want = httpx.post(f"{base}/v1/projects/acme/assemble", json=body).json()["payload"]
    if fmt == "markdown":
        assert shown.strip() == want.strip()
    else:
        assert json.loads(shown) == want
    if fmt == "anthropic":
        assert set(want) == {"system", "messages"} and want["messages"][0]["role"] == "user"
        page.screenshot(path=str(IMG / "inspector-payload.png"))
    page.click("#tabs button[data-tab=window]")


def test_a_stored_trace_opens_in_the_window_tab(page: object) -> None:
    """Any stored trace opens in the Window tab (its kept items by section, its gauge, its
    items and sources in the other tabs); its payload, not stored, is recomputed by a replay.
    The picker shows each trace's time to the millisecond and its task."""
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    old = assemble(page, "carol", "review the refresh token rotation", 2000)
    newer = assemble(page, "bob", "fix the login bug", 900)
    page.fill("#agent", "")  # every trace, not only bob's
    page.click("#refresh-traces-window")
    page.wait_for_selector(f"#trace-open option[value='{old}']", state="attached")
    options = page.eval_on_selector_all(
        "#trace-open option", "os => os.map(o => [o.value, o.text])"
    )
    labels = dict(options)
    assert re.search(
        r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} · carol · review the refresh", labels[old]
    )
    assert len(set(labels.values())) == len(labels)  # no two traces look the same
    assert newer in labels
    page.select_option("#trace-open", old)
    page.click("#open-trace")
    expect(page.locator("#window-source")).to_contain_text(f"Stored trace {old}")
    expect(page.locator("#window-source")).to_contain_text("review the refresh token rotation")
    assert page.evaluate("document.body.dataset.trace") == old
    expect(page.locator("#gauge-text")).to_contain_text("/ 2000 tokens")
    expect(page.locator("#sections")).to_contain_text("(preview)")
    expect(page.locator("#replay-of")).to_have_text(old)
    page.screenshot(path=str(IMG / "inspector-stored-trace.png"))
    page.locator("#sections li").first.click()
    expect(page.locator("#detail")).to_be_visible()
    page.click("#detail-close")
    page.click("#tabs button[data-tab=payload]")
    expect(page.locator("#payload-info")).to_contain_text("stored without its payload")
    page.click("#payload-recompute")
    expect(page.locator("#payload-info")).to_contain_text("Recomputed by replay")
    assert json.loads(page.locator("#payload").inner_text())[0]["role"] == "system"
    page.click("#tabs button[data-tab=window]")


def test_an_error_greys_the_stale_window(page: object) -> None:
    """After a failed request the old window stayed on screen under the banner, as if it were
    the answer. Now it is greyed and labelled stale until a request succeeds."""
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    assemble(page, "bob", "fix the login bug", 2000)
    expect(page.locator("#stale-note")).to_be_hidden()
    page.fill("#agent", "nobody-here")
    page.click("#assemble")
    expect(page.locator("#error")).to_contain_text("404")
    expect(page.locator("#stale-note")).to_be_visible()
    assert page.evaluate("document.body.dataset.stale") == "1"
    expect(page.locator("#sections")).to_have_css("opacity", "0.35")
    page.click("#tabs button[data-tab=payload]")
    expect(page.locator("#payload")).to_have_css("opacity", "0.35")
    page.click("#tabs button[data-tab=window]")
    page.screenshot(path=str(IMG / "inspector-stale.png"))
    assemble(page, "bob", "fix the login bug", 2000)
    expect(page.locator("#stale-note")).to_be_hidden()
    expect(page.locator("#sections")).to_have_css("opacity", "1")
    expect(page.locator("#error")).to_be_hidden()


def test_a_key_scoped_to_one_agent(page: object, tmp_path: Path) -> None:
    """With a key for acme's bob only, the inspector's requests all still work as bob (projects,
    agents, assemble, gauge, traces, compare, replay, records), it lists only bob's traces, and
    acting as carol is refused with the server's 403."""
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page) and page.context.browser is not None

    key = "bob-only-key-0"
    engine = Engine.open(f"sqlite:///{tmp_path / 'scoped.db'}")
    seed(engine)
    carol = engine.assemble("acme", "carol", "review the login fix", 2000).trace.id
    settings = Settings(api_keys={key: {"project": "acme", "agents": ["bob"]}})
    errors: list[str] = []
    try:
        with running(create_app(engine, settings)) as url:
            # A context of its own (its own localStorage) in the module's browser.
            context = page.context.browser.new_context(viewport={"width": 1360, "height": 900})
            context.add_init_script(f"localStorage.setItem('cw-key', '{key}')")
            pg = context.new_page()
            pg.on("pageerror", lambda e: errors.append(str(e)))
            pg.goto(f"{url}/")
            pg.wait_for_selector("body[data-ready='1']")
            assert pg.input_value("#project") == "acme"
            agents = pg.eval_on_selector_all("#agents option", "os => os.map(o => o.value)")
            assert agents == ["bob"]
            a = assemble(pg, "bob", "fix the login bug", 2000)
            b = assemble(pg, "bob", "fix the login bug where users are logged out", 900, "s1")
            expect(pg.locator("#error")).to_be_hidden()
            expect(pg.locator("#session-gauge")).to_contain_text("Session s1")
            pg.click("#tabs button[data-tab=compare]")
            pg.fill("#agent", "")  # every trace this key may read: bob's only
            pg.click("#refresh-traces")
            pg.wait_for_selector(f"#trace-a option[value='{a}']", state="attached")
            listed = pg.eval_on_selector_all("#trace-a option", "os => os.map(o => o.value)")
            assert set(listed) == {a, b} and carol not in listed
            pg.select_option("#trace-a", a)
            pg.select_option("#trace-b", b)
            pg.click("#compare")
            expect(pg.locator("#compare-out table.diff")).to_be_visible()
            pg.click("#tabs button[data-tab=replay]")
            pg.fill("#replay-budget", "250")
            pg.click("#replay")
            expect(pg.locator("#replay-out")).to_contain_text("available 900 → 250")
            pg.click("#tabs button[data-tab=records]")
            pg.fill("#rf-agent", "bob")
            pg.click("#browse")
            expect(pg.locator("#records tbody")).to_contain_text("login bug")
            expect(pg.locator("#records tbody")).not_to_contain_text("clock skew")
            pg.fill("#agent", "carol")
            pg.click("#assemble")
            expect(pg.locator("#error")).to_contain_text("403")
            expect(pg.locator("#error")).to_contain_text("only as bob")
            context.close()
    finally:
        engine.close()
    assert errors == []


def test_api_docs_render_with_the_network_blocked(page: object, base: str) -> None:
    """/docs was blank offline (Swagger UI from a CDN): with every request to anything but this
    server refused, the page still shows the API's title and its routes, and it asked for
    nothing outside."""
    from playwright.sync_api import Page, Route, expect

    assert isinstance(page, Page) and page.context.browser is not None
    context = page.context.browser.new_context(viewport={"width": 1360, "height": 900})
    outside: list[str] = []

    def only_this_server(route: Route) -> None:
        if route.request.url.startswith(base + "/"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", only_this_server)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(base + "/docs")
    expect(pg.locator(".swagger-ui .info .title")).to_contain_text("contextwright")
    expect(pg.locator(".opblock-summary-path").first).to_be_visible()
    context.close()
    assert outside == [] and errors == []
