"""PostgreSQL's bounded reads: full-text search on a large store looks for the newest matches
among the newest rows first and must still rank exactly the newest LARGE_WINDOW matches when the
words were busier long ago."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwright.ports import Query
from contextwright.records import Record, build_record
from contextwright.stores import postgres, postgres_text
from contextwright.stores.fulltext import COMMON_DF, LARGE_WINDOW
from contextwright.stores.postgres import PostgresStore
from contextwright.stores.postgres_schema import WORDS_SPAN
from contextwright.stores.postgres_search import K1, B
from contextwright.stores.postgres_text import COMMON_SURE, _array
from contextwright.text import query_terms

pytestmark = pytest.mark.postgres

P = "reads"
T0 = 1_750_000_000.0


def rec(i: int, content: str, **fields: Any) -> Record:
    data = {"id": f"q{i:05d}", "project": P, "author": "ann", "kind": "note",
            "content": content, "created_at": T0 + i, **fields}  # fmt: skip
    return build_record(data, lambda text: len(text.split()))


def test_a_word_busy_long_ago_still_ranks_the_newest_window(pg: PostgresStore) -> None:
    """1,100 matches among the oldest of 12,000 records: by its count the word is expected among
    the newest rows, where only 9 of its matches are. The newest LARGE_WINDOW (500) are ranked:
    their short ones (rank first), not only the long ones of the newest rows, and not the older
    short ones outside the window."""
    old_short, window_short, window_long = 600, 200, 300
    long_text = "alpha " + " ".join(f"word{k}" for k in range(40))
    contents = [
        *["alpha"] * old_short,  # outside the window: would outrank everything
        *["alpha beta"] * window_short,  # the best of the window
        *[long_text] * window_long,
        *[f"unrelated note {i}" for i in range(12_000 - 1_100)],
    ]
    assert window_short + window_long == LARGE_WINDOW
    records = [rec(i, c) for i, c in enumerate(contents)]
    for k in range(0, len(records), 2_000):
        pg.add_many(records[k : k + 2_000])
    hits = pg.search_text(P, "ann", "alpha", 40)
    best = {r.id for r in records[old_short : old_short + window_short]}
    assert len(hits) == 40
    assert {h.record.id for h in hits} <= best


def test_a_word_busy_lately_is_ranked_from_the_newest_rows(pg: PostgresStore) -> None:
    """The common case of the floor: matches spread evenly (one in 12, under a tenth of the
    records, which would be walked newest first), the newest 500 found above it."""
    records = [rec(i, "gamma" if i % 12 == 0 else f"other {i}") for i in range(14_000)]
    for k in range(0, len(records), 2_000):
        pg.add_many(records[k : k + 2_000])
    hits = pg.search_text(P, None, "gamma", 40)
    newest = [r.id for r in records if r.content == "gamma"][-LARGE_WINDOW:]
    assert len(hits) == 40
    # Equal scores: the newest first, all of them from the window.
    assert [h.record.id for h in hits] == newest[::-1][:40]


def test_visibility_reads_no_addressing_row(pg: PostgresStore) -> None:
    """Who may see a direct record is decided from the row (its recipients): the rule once read
    the addressing table, which the planner turned into a hash of all of the agent's rows."""
    pg.add_many([
        rec(1, "for bob", visibility="direct", to=["bob"]),
        rec(2, "for cy", visibility="direct", to=["cy"]),
        rec(3, "to all, naming @bob"),
    ])  # fmt: skip
    assert [r.id for r in pg.query(Query(P, "bob", newest_first=False))] == ["q00001", "q00003"]
    assert [r.id for r in pg.query(Query(P, "cy", newest_first=False))] == ["q00002", "q00003"]
    assert [r.id for r in pg.query(Query(P, None, addressed_to="bob", newest_first=False))] == [
        "q00001",
        "q00003",
    ]
    plans: list[str] = []
    read = pg._read

    def explain(sql: str, params: Any = None, **kw: Any) -> list[Any]:
        plans.append("\n".join(r[0] for r in read(f"EXPLAIN {sql}", params)))
        return read(sql, params, **kw)

    pg._read = explain  # type: ignore[method-assign]
    pg.query(Query(P, "bob", limit=5))
    pg.search_text(P, "bob", "bob", 5)
    assert plans and not [p for p in plans if "addressing" in p]


def test_addressed_reads_walk_the_names_rows_in_time_order(pg: PostgresStore) -> None:
    """Records addressed to a name (by `to` or @mention, once each) in time order through the
    addressing rows' time index, stopping at the limit: the 5 newest of 5,000 records addressed
    to bob read a handful of rows, not every record addressed to him nor the project's newest
    ones addressed to nobody (7-20 ms a call at 100k records before m010_addressing_time)."""
    pg.add_many([
        rec(i, f"note {i}" + (" @bob" if i % 3 == 0 else ""),
            **({"visibility": "direct", "to": ["bob"]} if i % 5 == 0 else {}))
        for i in range(1, 31)
    ])  # fmt: skip
    expected = [f"q{i:05d}" for i in range(30, 0, -1) if i % 3 == 0 or i % 5 == 0]
    got = pg.query(Query(P, None, addressed_to="bob", limit=50))
    assert [r.id for r in got] == expected  # q00015 and q00030 (both ways) once each
    oldest = pg.query(Query(P, "cy", addressed_to="bob", newest_first=False, limit=4))
    assert [r.id for r in oldest] == ["q00003", "q00006", "q00009", "q00012"]  # cy sees no direct
    notes = pg.query(Query(P, "bob", addressed_to="bob", kinds=["note"], limit=3))
    assert [r.id for r in notes] == ["q00030", "q00027", "q00025"]
    # Older in time than every record above, though stored after them: read last.
    pg.add_many([rec(0, "early @bob", created_at=T0 - 10)])
    got = pg.query(Query(P, None, addressed_to="bob", limit=50))
    assert [r.id for r in got] == [*expected, "q00000"]
    pg.add_many([rec(i, f"aside {i}") for i in range(100, 1_100)])
    for k in range(2_000, 7_000, 2_500):
        pg.add_many([rec(i, f"late {i} @bob") for i in range(k, k + 2_500)])
    pg.add_many([rec(i, f"aside {i}") for i in range(7_000, 8_000)])
    # Every row rewritten, as m010's fill does: no page all-visible until a VACUUM, so an
    # index-only walk of all the name's rows costs a heap visit each, and the planner would
    # rather sort them all unless it costs the walk for the LIMIT's rows only.
    pg._run("UPDATE addressing SET created_at = created_at", None)
    pg._run("ANALYZE addressing", None)
    pg._run("ANALYZE records", None)
    sql, params = postgres._query_sql(Query(P, "bob", addressed_to="bob", limit=5))
    plan = "\n".join(r[0] for r in pg._read(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", params))
    assert [r.id for r in pg.query(Query(P, "bob", addressed_to="bob", limit=5))] == [
        f"q{i:05d}" for i in range(6_999, 6_994, -1)
    ]
    assert "addressing_time" in plan, plan
    # The walk stopped at the limit: a few rows read from the index, not the 5,000 addressed.
    read = [int(line.split("rows=")[2].split()[0]) for line in plan.splitlines()
            if "addressing_time" in line]  # fmt: skip
    assert read and max(read) < 20, plan


def _common_words(pg: PostgresStore) -> None:
    """4,000 records: omega in all of them, kappa in 2,500, rho in 10; then ANALYZE."""
    records = [
        rec(i, " ".join(["omega", *(["kappa"] if i < 2_500 else []), *(["rho"] if i < 10 else [])]))
        for i in range(4_000)
    ]
    for k in range(0, len(records), 2_000):
        pg.add_many(records[k : k + 2_000])
    pg._run("ANALYZE record_words", None)


def test_a_word_the_statistics_call_common_is_not_counted(pg: PostgresStore) -> None:
    """On a large store a word is counted up to COMMON_DF + 1, and not at all where ANALYZE's
    statistics put it in more than COMMON_SURE records: the estimate stands for the count."""
    _common_words(pg)
    # As if the store were 250 times larger: the statistics' share of rows, times that size.
    counts = pg._count_words(["omega", "kappa", "rho"], 1_000_000)
    assert counts == {"omega": 1_000_000, "kappa": 625_000, "rho": 10}
    # At its real size, kappa (2,500 records) is under COMMON_SURE: counted, up to the cutoff.
    assert COMMON_DF < 2_500 <= COMMON_SURE
    assert pg._count_words(["kappa", "rho"], 4_000) == {"kappa": COMMON_DF + 1, "rho": 10}


def test_capped_counts_are_completed_in_the_same_read_only_when_every_word_is_common(
    pg: PostgresStore,
) -> None:
    """Every word of a search past the cutoff: those counted up to the cap only are counted in
    full (the rarest is ranked), in the first count's own statement; with a word under the cutoff
    the full counts are planned but never run."""
    _common_words(pg)
    reads: list[tuple[str, Any]] = []
    read = pg._read

    def spy(sql: str, params: Any = None, **kw: Any) -> Any:
        reads.append((sql, params))
        return read(sql, params, **kw)

    pg._read = spy  # type: ignore[method-assign]
    # omega by the statistics' estimate (4,000 > COMMON_SURE), kappa capped, then in full.
    assert pg._count_words(["omega", "kappa"], 4_000) == {"omega": 4_000, "kappa": 2_500}
    assert pg._count_words(["kappa", "rho"], 4_000) == {"kappa": COMMON_DF + 1, "rho": 10}
    counts = [(sql, params) for sql, params in reads if sql.startswith("WITH f AS")]
    assert len(counts) == 2
    # The capped counts and the full counts are subplans, in that order: the full count runs
    # only in the first read (omega's estimate is no count, kappa's capped count runs in both).
    for (sql, params), want in zip(counts, ([True, True], [True, False]), strict=True):
        lines = [r[0] for r in read(f"EXPLAIN ANALYZE {sql}", params)]
        ran = [
            "never executed" not in lines[k + 1]
            for k, line in enumerate(lines)
            if line.strip().startswith("SubPlan")
        ]
        assert ran == want, "\n".join(lines)


def test_the_statistics_are_read_once_for_many_counts(pg: PostgresStore) -> None:
    """ANALYZE's common lexemes are read once and kept (MCE_TTL), not on every word count, and
    read again once that time has passed or the store's size moved: a later ANALYZE's figures
    then count."""
    _common_words(pg)
    stats: list[str] = []
    read = pg._read

    def spy(sql: str, params: Any = None, **kw: Any) -> Any:
        if "pg_stats" in sql:
            stats.append(sql)
        return read(sql, params, **kw)

    pg._read = spy  # type: ignore[method-assign]
    for words in (["omega"], ["omega", "rho"], ["kappa", "omega", "rho"], ["absent"]):
        pg._count_words(words, 1_000_000)
    assert len(stats) == 1
    assert pg._count_words(["omega"], 1_000_000) == {"omega": 1_000_000}
    # Read again with the statistics unchanged: the same statement text, still prepared.
    at, key, sql = pg._mce
    pg._mce = (at - postgres_text.MCE_TTL - 1, key, sql)
    assert pg._count_words(["omega"], 1_000_000) == {"omega": 1_000_000}
    assert len(stats) == 2 and pg._mce[2] == sql
    # omega now in a quarter of the rows, by a new ANALYZE: not seen until the figures expire.
    pg.add_many([rec(10_000 + i, "sigma") for i in range(12_000)])
    pg._run("ANALYZE record_words", None)
    assert pg._count_words(["omega"], 1_000_000) == {"omega": 1_000_000}
    at, key, sql = pg._mce
    pg._mce = (at - postgres_text.MCE_TTL - 1, key, sql)
    assert pg._count_words(["omega"], 1_000_000) == {"omega": 250_000}
    assert pg._count_words(["omega"], 2_000_000) == {"omega": 500_000}  # another size: read
    assert len(stats) == 4


def test_the_common_lexemes_go_into_the_statement_as_they_are(pg_url: str) -> None:
    """Lexemes with quotes, backslashes, percent signs and braces survive their trip into the
    counts' statement text as array constants."""
    import psycopg

    odd = ["it's", 'say "hi"', "back\\slash", "50%", "{brace}", "a,b", "", "naïve"]
    assert _array(odd, "text").count("%%") == 1
    with psycopg.connect(pg_url, autocommit=True) as conn:
        sql = f"SELECT {_array(odd, 'text')}, {_array(['1.5', '-2.0'], 'float8')}"
        got = conn.execute(sql, {}).fetchone()
    assert got == (odd, [1.5, -2.0])


def test_the_statistics_of_the_newest_two_partitions_estimate_a_words_share(pg_url: str) -> None:
    """ANALYZE's statistics are per partition of the words: a word's estimated share is its share
    in the newest two partitions analyzed, weighted by their rows, and a word that only an older
    partition lists is not taken as common (it is counted)."""
    import psycopg

    name = "cw_partition_stats"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    base, _, query = pg_url.partition("?")
    url = base.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")
    store = PostgresStore(url, max_size=1)
    try:
        # Partition 0: omega in every record; 1: kappa in every one, omega in a quarter; 2: kappa
        # in half of twice as many. Newest two: omega in 1,000 of 12,000, kappa in 8,000.
        parts = [
            (0, 3_000, lambda i: "omega"),
            (1, 4_000, lambda i: "kappa" + (" omega" if i % 4 == 0 else "")),
            (2, 8_000, lambda i: "kappa" if i % 2 else "rho"),
        ]
        n = 0
        for k, size, text in parts:
            store._run(f"SELECT setval('records_rid_seq', {k * WORDS_SPAN + 1})", None)
            batch = [rec(n + i, text(i)) for i in range(size)]
            for at in range(0, size, 2_000):
                store.add_many(batch[at : at + 2_000])
            n += size
        store._run("ANALYZE record_words", None)
        assert store._count_words(["kappa"], 100) == {"kappa": 8_000}  # the exact count
        store._top = (float("inf"), 2 * WORDS_SPAN + 8_001)
        # As if the store were 1,000 times larger: the statistics' share times that size.
        total = 15_000_000
        counts = store._count_words(["omega", "kappa"], total)
        assert counts["kappa"] == round(total * 8_000 / 12_000)
        assert counts["omega"] == round(total * 1_000 / 12_000)
    finally:
        store.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_word_counts_keep_one_generic_plan_with_the_same_counts(
    pg: PostgresStore, pg_url: str
) -> None:
    """The word counts of a large store are planned once per connection, whatever the number of
    words (one statement text, prepared on its first run; the server keeps a generic plan:
    planning them over every partition cost more than running them), and count what a plan made
    for the words counts."""
    _common_words(pg)
    one = PostgresStore(pg_url, max_size=1)
    try:
        pairs = [["omega", "rho"], ["kappa"], ["omega", "kappa", "rho"], ["rho", "absent"]] * 2
        read = one._read

        def replanned(sql: str, params: Any = None, **kw: Any) -> list[Any]:
            return read(sql, params, replan=True)

        planned = []
        for words in pairs:
            got = one._count_words(words, 1_000_000)
            one._read = replanned  # type: ignore[method-assign]
            planned.append(got == one._count_words(words, 1_000_000))
            one._read = read  # type: ignore[method-assign]
        assert all(planned)
        plans = one._read(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE 'WITH f AS%%'"
        )
        assert plans == [(len(pairs), 0)]
    finally:
        one.close()


VOCAB = ["alpha", "beta", "gamma", "delta", "running", "runs", "the", "zeta"]
_EXAMPLES = itertools.count()


def _reference(
    pg: PostgresStore, project: str, agent: str | None, task: str, limit: int, window: int = 0
) -> list[tuple[str, float]]:
    """BM25 as the search defines it, computed here from each row's lexemes and length (what the
    ranking once read from every matched row's tsvector) with the store's own word counts, over
    the newest `window` matches if one is given."""
    counts, total, avg = pg._counts(sorted(set(query_terms(task))))
    words = list(query_terms(task))
    lexemes = {
        w: set(pg._read("SELECT tsvector_to_array(to_tsvector('english', %s))", (w,))[0][0])
        for w in words
    }
    rows = pg._read(
        "SELECT r.id, r.rid, tsvector_to_array(w.tsv), length(w.tsv), r.visibility, r.author "
        "FROM records r JOIN record_words w USING (project, rid) "
        "WHERE r.project = %s ORDER BY r.rid DESC",
        (project,),
    )
    n = max(total, 1)
    weight = {w: math.log(1 + (n - max(counts[w][0], 1) + 0.5) / (max(counts[w][0], 1) + 0.5))
              for w in words}  # fmt: skip
    scored = []
    matched = 0
    for rid_, rid, lex, length, visibility, author in rows:
        held = [w for w in words if lexemes[w] and lexemes[w] <= set(lex)]
        matched += bool(held)
        if window and matched > window:
            break
        if agent is not None and visibility != "project" and author != agent:
            continue
        if held:
            score = sum(weight[w] for w in held) * (K1 + 1) / (1 + K1 * (1 - B + B * length / avg))
            scored.append((-score, -rid, rid_))
    return [(i, -s) for s, _, i in sorted(scored)[:limit]]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    texts=st.lists(
        st.lists(st.sampled_from(VOCAB), min_size=1, max_size=30).map(" ".join),
        min_size=1,
        max_size=40,
    ),
    task=st.lists(st.sampled_from([*VOCAB, "absent"]), min_size=1, max_size=3).map(" ".join),
    private=st.sets(st.integers(0, 39)),
    limit=st.integers(1, 12),
)
def test_the_ranking_is_bm25_of_each_rows_words_and_length(
    pg: PostgresStore, texts: list[str], task: str, private: set[int], limit: int
) -> None:
    """Whichever words a row holds and however long it is, the hits and their scores are BM25's
    over the row's lexemes (which words each index scan found, and the length kept beside the
    tsvector, stand for reading the tsvector), best first, then newest; private rows of another
    author unseen."""
    project = f"bm25-{next(_EXAMPLES)}"
    pg.add_many([
        rec(i, t, project=project, author="bob" if i % 2 else "ann",
            visibility="private" if i in private else "project")
        for i, t in enumerate(texts)
    ])  # fmt: skip
    for agent in (None, "ann"):
        hits = pg.search_text(project, agent, task, limit)
        got = [(h.record.id, h.score) for h in hits]
        want = _reference(pg, project, agent, task, limit)
        assert [i for i, _ in got] == [i for i, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9)


@pytest.mark.parametrize(
    ("records", "every"),
    [(4_200, {"alpha": 3, "beta": 4}), (12_000, {"alpha": 20, "beta": 25})],
    ids=["walked", "above-a-floor"],
)
def test_two_words_on_a_large_store_rank_the_newest_window_of_either(
    pg: PostgresStore, records: int, every: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each word's newest matches are found on its own; the window ranked is still the newest
    LARGE_WINDOW records holding either word, and a row holding both has both weights. Both ways
    a large store takes: the rows walked newest first (the words in a tenth of the records or
    more), and the matches sought above a floor."""
    filler = [f"w{k}" for k in range(9)]
    texts = [
        " ".join([w for w, k in every.items() if i % k == 0] + filler[: i % 9] or ["other"])
        for i in range(records)
    ]
    batch = [rec(i, t, visibility="private" if i % 7 == 0 else "project",
                 author="bob" if i % 2 else "ann") for i, t in enumerate(texts)]  # fmt: skip
    for k in range(0, len(batch), 4_000):
        pg.add_many(batch[k : k + 4_000])
    searches: list[dict[str, Any]] = []
    read = pg._read

    def spy(sql: str, params: Any = None, **kw: Any) -> list[Any]:
        if "s.score" in sql:
            searches.append({**params, "walked": "strip(" in sql})
        return read(sql, params, **kw)

    for agent in (None, "ann"):
        monkeypatch.setattr(pg, "_read", spy)
        got = [(h.record.id, h.score) for h in pg.search_text(P, agent, "alpha beta", 40)]
        monkeypatch.undo()
        want = _reference(pg, P, agent, "alpha beta", 40, window=LARGE_WINDOW)
        assert len(got) == 40
        assert [i for i, _ in got] == [i for i, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9)
    walked = records < 10 * sum(records // k for k in every.values())
    assert [(s["walked"], s["floor"] > 0) for s in searches] == [(walked, not walked)] * 2


def test_full_text_reads_are_planned_for_their_words_every_time(pg_url: str) -> None:
    """psycopg prepares a statement run 5 times on a connection, and the server may then keep one
    generic plan, blind to the words: the searches and word counts are never prepared."""
    store = PostgresStore(pg_url, max_size=1)
    try:
        store.add_many([rec(i, f"delta note {i} w{i % 7}") for i in range(40)])
        for i in range(12):
            store.search_text(P, "ann", f"delta w{i % 7} x{i}", 10)
        prepared = [r[0] for r in store._read("SELECT statement FROM pg_prepared_statements")]
        assert not [s for s in prepared if "s.score" in s or "count(*)" in s]
        assert store._read("SELECT 1")  # any other read is prepared as before
        for _ in range(6):
            store.query(Query(P, "ann", limit=3))
        assert store._read("SELECT count(*) FROM pg_prepared_statements")[0][0] > 0
    finally:
        store.close()


def test_the_tasks_word_counts_are_read_with_the_agent(pg: PostgresStore) -> None:
    """On a large store, the counts a search would read next go in the round trip of the call's
    first read (`doc_with_version` with the task's words): the search then reads no count, and
    finds the counts it would have read itself."""
    _common_words(pg)
    pg.put_doc("agents", f"{P}/ann", P, {"id": "ann"}, T0)
    pg.search_text(P, None, "omega", 10)  # the store's size, lengths and common lexemes known
    assert pg._text_state()[1].get("kappa") is None
    counted: list[str] = []
    count = pg._count_words

    def spy(words: list[str], total: int) -> dict[str, int]:
        counted.extend(words)
        return count(words, total)

    pg._count_words = spy  # type: ignore[method-assign]
    doc, version = pg.doc_with_version("agents", P, f"{P}/ann", ["kappa", "rho", "omega"])
    assert doc == {"id": "ann"} and version == pg.version(P)
    cache = pg._text_state()[1]
    with_agent = {t: cache[t][0] for t in ("kappa", "rho")}
    hits = pg.search_text(P, None, "kappa rho", 10)
    assert counted == [] and hits  # no count read by the search
    assert with_agent == count(["kappa", "rho"], 4_000) == {"kappa": COMMON_DF + 1, "rho": 10}
    # The counts fail: the agent and the version are still read, and the search counts.
    pg._text_state()[1].clear()
    pg._mce = (pg._mce[0], pg._mce[1], "SELECT no_such_column")
    assert pg.doc_with_version("agents", P, f"{P}/ann", ["kappa"]) == (doc, version)
    assert pg._text_state()[1].get("kappa") is None
