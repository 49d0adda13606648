"""Task signals: what a task is about, read from its text. A pure function, no I/O.

`extract_task_signals` finds keywords (lowercased, stopwords removed, technical terms such as
`useAuth`, `src/app.ts` and `JWT` kept whole, their parts added after them), domains from a
configurable trigger mapping (the spec's table by default), file paths as written, and the task
type from metadata. The knowledge graph and the context map are queried with these signals.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..text import STOPWORDS

DEFAULT_DOMAINS: Mapping[str, tuple[str, ...]] = {
    "api": ("endpoint", "rest", "graphql", "route", "request"),
    "auth": ("login", "token", "jwt", "session", "password"),
    "database": ("query", "schema", "migration", "model", "record"),
    "ui": ("component", "button", "form", "page", "style"),
    "testing": ("test", "spec", "mock", "assert", "coverage"),
}
# Words every task says that name no topic.
TASK_STOPWORDS = frozenset(
    [
        "add",
        "adds",
        "added",
        "adding",
        "implement",
        "implements",
        "implemented",
        "implementing",
        "create",
        "creates",
        "created",
        "ensure",
        "ensures",
        "make",
        "makes",
        "made",
        "use",
        "uses",
        "using",
        "used",
        "should",
        "must",
        "will",
        "would",
        "shall",
        "need",
        "needs",
        "needed",
        "via",
        "also",
        "able",
        "sure",
        "new",
        "etc",
        "e.g",
        "i.e",
        "work",
        "works",
        "working",
        "done",
        "task",
        "tasks",
        "given",
        "get",
        "gets",
        "set",
        "sets",
        "let",
        "lets",
        "like",
        "within",
        "without",
        "per",
        "way",
        "ways",
        "one",
        "two",
        "every",
        "all",
        "any",
        "each",
        "see",
        "across",
        "along",
        "among",
        "around",
        "behind",
        "beyond",
        "despite",
        "inside",
        "outside",
        "since",
        "toward",
        "towards",
        "upon",
        "onto",
        "whether",
        "though",
        "although",
        "instead",
    ]
)
# File extensions that make `name.ext` a file mention (so `Query.orders` is not one).
EXTENSIONS = frozenset(
    [
        "py",
        "pyi",
        "ipynb",
        "ts",
        "tsx",
        "js",
        "jsx",
        "mjs",
        "cjs",
        "json",
        "yaml",
        "yml",
        "toml",
        "md",
        "mdx",
        "rst",
        "txt",
        "html",
        "htm",
        "css",
        "scss",
        "sass",
        "less",
        "rb",
        "go",
        "rs",
        "java",
        "kt",
        "kts",
        "swift",
        "c",
        "h",
        "cc",
        "cpp",
        "hpp",
        "cs",
        "php",
        "sql",
        "sh",
        "bash",
        "zsh",
        "ps1",
        "ini",
        "cfg",
        "conf",
        "env",
        "lock",
        "xml",
        "csv",
        "tsv",
        "vue",
        "svelte",
        "proto",
        "graphql",
        "gql",
        "tf",
        "hcl",
        "gradle",
        "mk",
        "ex",
        "exs",
        "erl",
        "scala",
        "clj",
        "dart",
        "lua",
        "pl",
        "svg",
        "png",
        "jpg",
        "jpeg",
        "gif",
        "pdf",
        "log",
        "db",
        "sqlite",
        "ejs",
        "hbs",
        "erb",
        "jinja",
        "j2",
        "lockb",
    ]
)
STOP = STOPWORDS | TASK_STOPWORDS
MAX_KEYWORDS = 64

# A token: paths (src/app.ts, ./lib/x), dotted names (app.config.ts), identifiers, words.
_TOKEN_RE = re.compile(r"[A-Za-z0-9_@~.][A-Za-z0-9_@~.\-/]*[A-Za-z0-9_]|[A-Za-z0-9]")
_FILE_EXT_RE = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_VERSION_RE = re.compile(r"^v?\d+(\.\d+)+$")
_ABBREV = {"e.g", "i.e", "etc", "vs"}
_CODE_ROOTS = {"src", "lib", "pkg", "internal", "source"}


@dataclass(frozen=True)
class TaskSignals:
    keywords: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    files_mentioned: tuple[str, ...] = ()
    task_types: tuple[str, ...] = ()
    mentions: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, list[str]]:
        return {
            "keywords": list(self.keywords),
            "domains": list(self.domains),
            "files_mentioned": list(self.files_mentioned),
            "task_types": list(self.task_types),
            "mentions": list(self.mentions),
        }

    @property
    def tags(self) -> tuple[str, ...]:
        """Every signal that can match a node's tag: keywords, then domains, then task types."""
        seen: dict[str, None] = {}
        for t in (*self.keywords, *self.domains, *(t.lower() for t in self.task_types)):
            seen.setdefault(t, None)
        return tuple(seen)


def is_path(token: str) -> bool:
    """`src/app.ts`, `lib/auth/`, `README.md`; not `e.g`, `v1.2.3` or `U.S`."""
    t = token.rstrip(".")
    if t.lower() in _ABBREV or _VERSION_RE.match(t) or "://" in t:
        return False
    if "/" in t:
        return any(c.isalpha() for c in t)
    m = _FILE_EXT_RE.search(t)
    return m is not None and m.start() > 0 and m.group(0)[1:].lower() in EXTENSIONS


def split_identifier(token: str) -> list[str]:
    """useAuth -> [use, auth]; user_id -> [user, id]; src/app -> [src, app]."""
    parts: list[str] = []
    for chunk in re.split(r"[^A-Za-z0-9]+", token):
        parts.extend(_CAMEL_RE.findall(chunk))
    return [p.lower() for p in parts if p]


def _is_technical(token: str) -> bool:
    body = token.strip("._-")
    if not body:
        return False
    has_inner_upper = any(c.isupper() for c in body[1:]) and any(c.islower() for c in body)
    return (
        has_inner_upper
        or (body.isupper() and len(body) > 1)
        or any(c in body for c in "_./-")
        or (any(c.isdigit() for c in body) and any(c.isalpha() for c in body))
    )


def keywords_of(text: str, limit: int = MAX_KEYWORDS) -> tuple[list[str], list[str]]:
    """(keywords, file paths) of `text`, in first-occurrence order."""
    keywords: dict[str, None] = {}
    files: dict[str, None] = {}

    def keep(word: str) -> None:
        if len(keywords) < limit and len(word) > 1 and word not in STOP:
            keywords.setdefault(word, None)

    for raw in _TOKEN_RE.findall(text.replace("`", " ")):
        token = raw.strip(".-/") if not is_path(raw) else raw.rstrip(".")
        if not token:
            continue
        if token.startswith("@"):
            continue  # mentions are addressing, not topics
        if is_path(token):
            files.setdefault(token, None)
            keep(token.lower())
            ext = _FILE_EXT_RE.search(token)
            stem = token[: ext.start()] if ext is not None else token
            for p in split_identifier(stem):
                if p not in _CODE_ROOTS:  # `src` would match every entry of the context map
                    keep(p)
            continue
        if _is_technical(token):
            keep(token.lower())
            parts = split_identifier(token)
            if len(parts) > 1:
                for p in parts:
                    keep(p)
            continue
        keep(token.lower())
    return list(keywords), list(files)


def _stem(word: str) -> str:
    for suffix in ("ies", "es", "s"):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def domains_of(
    keywords: Iterable[str], mapping: Mapping[str, Sequence[str]] = DEFAULT_DOMAINS
) -> list[str]:
    """Domains whose name or any trigger is a keyword (plurals count: tokens -> token)."""
    words: set[str] = set()
    for k in keywords:
        words.add(k)
        words.add(_stem(k))
        if k.endswith("es"):
            words.add(k[:-1])
    return [
        domain
        for domain, triggers in mapping.items()
        if domain.lower() in words or any(t.lower() in words for t in triggers)
    ]


def extract_task_signals(
    objective: str,
    acceptance_criteria: Sequence[str] = (),
    task_type: str | None = None,
    *,
    name: str = "",
    domains: Mapping[str, Sequence[str]] = DEFAULT_DOMAINS,
) -> TaskSignals:
    """The spec's extractTaskSignals: the name, objective and criteria are the text."""
    text = " ".join([name, objective, *acceptance_criteria])
    keywords, files = keywords_of(text)
    mentions = re.findall(r"(?<![\w@])@([A-Za-z0-9_][\w.\-]*[\w])", text)
    return TaskSignals(
        keywords=tuple(keywords),
        domains=tuple(domains_of(keywords, domains)),
        files_mentioned=tuple(files),
        task_types=(task_type,) if task_type else (),
        mentions=tuple(dict.fromkeys(mentions)),
    )


def signals_of_task(meta: Mapping[str, Any], domains: Mapping[str, Sequence[str]]) -> TaskSignals:
    criteria = meta.get("acceptance_criteria") or []
    return extract_task_signals(
        str(meta.get("objective", "")),
        [str(c) for c in criteria],
        str(meta.get("type") or "") or None,
        name=str(meta.get("name", "")),
        domains=domains,
    )


def tags_for_text(text: str, domains: Mapping[str, Sequence[str]] = DEFAULT_DOMAINS) -> list[str]:
    """Tags for a node given no `applies_to`: its keywords and domains (at most 24)."""
    keywords, _ = keywords_of(text, limit=20)
    return list(dict.fromkeys([*keywords, *domains_of(keywords, domains)]))[:24]
