"""Key-value memory as a source: an @mention of a key pulls its value into the window.

Keys and values live per project in the store (`engine.kv_set`). Teams keep short standing facts
there: the deploy target, the API base URL, the name of the release branch. Mentioning `@key` (or
`@kv:key`) in the task, or in a record addressed to the agent, brings the value into the
`knowledge` section with the reason `@key`. A mention that names no key is left to validation,
which turns a task's unresolved reference into a warning.
"""

from __future__ import annotations

from ..ports import Query
from ..records import content_hash, parse_mentions
from .candidates import Candidate
from .sources import SourceContext

KV_PREFIX = "kv:"
# How many addressed records to read for mentions, and how many values at most per call.
ADDRESSED_SCAN = 25
MAX_VALUES = 20


def kv_key(mention: str) -> str:
    """`kv:deploy.target` and `deploy.target` both name the key `deploy.target`."""
    return mention[len(KV_PREFIX) :] if mention.startswith(KV_PREFIX) else mention


def kv_candidate(ctx: SourceContext, key: str, value: str, reason: str, source: str) -> Candidate:
    text = f"- [kv · {key}] {value}"
    return Candidate(
        key=f"kv:{key}",
        section="knowledge",
        source=source,
        text=text,
        tokens=ctx.counter.count(text),
        components={"prior": 1.5},
        reasons=(reason,),
        content_hash=content_hash(value),
        sources=(source,),
    )


class KVSource:
    """Values of the KV keys that the task, or a record addressed to this agent, @mentions."""

    name = "kv"
    inline = True  # a short indexed read: runs on the calling thread (pipeline.py)

    def queries(self, ctx: SourceContext) -> list[Query]:
        if not ctx.agent:
            return []
        return [Query(ctx.project, ctx.agent, addressed_to=ctx.agent, limit=ADDRESSED_SCAN)]

    def run(self, ctx: SourceContext) -> list[Candidate]:
        wanted: dict[str, str] = {}  # key -> reason
        for m in parse_mentions(ctx.task):
            wanted.setdefault(kv_key(m), f"@{kv_key(m)}")
        for q in self.queries(ctx):
            for r in ctx.query(q):
                for m in r.mentions:
                    if m != ctx.agent:
                        wanted.setdefault(kv_key(m), f"@{kv_key(m)} (in {r.author}'s {r.kind})")
        out: list[Candidate] = []
        limit = ctx.limit(self.name, MAX_VALUES)
        for key, reason in wanted.items():
            if len(out) >= limit or not key:
                break
            value = ctx.store.kv_get(ctx.project, key)
            if value is not None:
                out.append(kv_candidate(ctx, key, value, reason, self.name))
        return out
