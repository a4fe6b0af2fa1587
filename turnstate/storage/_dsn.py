"""PostgreSQL DSNs as the command line takes them: recognised, split, redacted."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
DEFAULT_SCHEMA = "turnstate"


def is_dsn(target: str) -> bool:
    """Whether ``target`` names a PostgreSQL database rather than an SQLite file."""
    return target.startswith(POSTGRES_SCHEMES)


def split_schema(dsn: str) -> tuple[str, str]:
    """``(dsn, schema)``: turnstate's own ``schema`` query parameter taken out of the DSN
    (``postgresql://host/db?schema=tenant_a``), ``turnstate`` when there is none."""
    parts = urlsplit(dsn)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for key, value in query if key == "schema"]
    rest = [(key, value) for key, value in query if key != "schema"]
    return urlunsplit(parts._replace(query=urlencode(rest))), (schemas or [DEFAULT_SCHEMA])[-1]


SECRET_PARAMETERS = frozenset({"password", "passfile", "sslpassword"})


def redact_dsn(target: str) -> str:
    """``target`` fit to print: a DSN loses its password (in the user part and in the
    query), a path is unchanged."""
    if not is_dsn(target):
        return target
    parts = urlsplit(target)
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username or ''}@{host}")
    query = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(key, value) for key, value in query if key.lower() not in SECRET_PARAMETERS]
    if len(kept) != len(query):
        parts = parts._replace(query=urlencode(kept))
    return urlunsplit(parts)
