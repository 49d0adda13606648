"""A PostgreSQL store's URL: the password kept out of messages, `pool_max` taken out for the
pool (libpq would reject it)."""

from __future__ import annotations

import re
from urllib.parse import unquote

from ..errors import ValidationError

_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:@/?#]*):.*@")
_PASSWORD_KV = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]*)", re.IGNORECASE)


def redact(url: str) -> str:
    """The URL without its password (in the user part or as a `password=` parameter)."""
    return _PASSWORD_KV.sub(r"\1***", _USERINFO.sub(r"\1:***@", url, count=1))


def password_of(conninfo: str) -> str | None:
    try:
        from psycopg.conninfo import conninfo_to_dict

        value = conninfo_to_dict(conninfo).get("password")
    except Exception:  # unparsable: the connect that follows says why
        m = _USERINFO.match(conninfo)
        value = unquote(conninfo[len(m.group(1)) + 1 : m.end() - 1]) if m else None
    return str(value) if value else None


def take_pool_option(url: str) -> tuple[str, int | None]:
    """Take `pool_max=N` out of the URL's query (libpq would reject it); the rest goes to libpq."""
    base, sep, query = url.partition("?")
    if not sep or "://" not in base:
        return url, None
    keep, pool_max = [], None
    for part in query.split("&"):
        name, _, value = part.partition("=")
        if name != "pool_max":
            keep.append(part)
        elif value.isdigit() and int(value) >= 1:
            pool_max = int(value)
        else:
            raise ValidationError("pool_max", value, "give a whole number of connections >= 1")
    return base + ("?" + "&".join(keep) if keep else ""), pool_max
