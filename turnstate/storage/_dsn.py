"""PostgreSQL DSNs as the command line takes them: recognised, split, redacted."""

from __future__ import annotations

from urllib.parse import SplitResult, parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from turnstate.core._errors import ConfigurationError

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
DEFAULT_SCHEMA = "turnstate"


def is_dsn(target: str) -> bool:
    """Whether ``target`` names a PostgreSQL database rather than an SQLite file."""
    return target.startswith(POSTGRES_SCHEMES)


def split_schema(dsn: str) -> tuple[str, str]:
    """``(dsn, schema)``: turnstate's own ``schema`` query parameter taken out of the DSN
    (``postgresql://host/db?schema=tenant_a``), ``turnstate`` when there is none.

    Raises:
        ConfigurationError: ``dsn`` is not a URL (``dsn_problem``), never quoting it.
    """
    parts = _split(dsn)
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
    try:
        parts = urlsplit(target)
    except ValueError:  # not a URL: nothing in it can be told apart from a password
        return target.partition("://")[0] + "://..."
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username or ''}@{host}")
    query = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(key, value) for key, value in query if key.lower() not in SECRET_PARAMETERS]
    if len(kept) != len(query):
        parts = parts._replace(query=urlencode(kept))
    return urlunsplit(parts)



def dsn_problem(target: str) -> str | None:
    """What makes a PostgreSQL DSN unusable before any connection, in words that never
    quote it (it may hold a password): a URL Python cannot split (an unclosed IPv6
    bracket), a host's port past 65535 (the connection raised ``OverflowError``) or not
    a number. Multi-host DSNs (``host1:port1,host2:port2``, as asyncpg takes them) are
    checked host by host; a host without a port is left alone. None for a path or a DSN
    without any of these."""
    if not is_dsn(target):
        return None
    try:
        netloc = urlsplit(target).netloc
    except ValueError as exc:
        return f"the PostgreSQL DSN is not a URL ({exc})"
    for host in netloc.rpartition("@")[2].split(","):
        _, colon, port = host.rpartition("]")[2].rpartition(":")  # an IPv6's colons aside
        if not colon or not port:
            continue
        if not (port.isascii() and port.isdigit()):
            return "not a usable PostgreSQL DSN: a host's port is not a number"
        if int(port) > MAX_PORT:
            return f"the PostgreSQL DSN names port {port}: a port is 0 to {MAX_PORT}"
    return None


MAX_PORT = 65_535


def check_dsn(dsn: str) -> None:
    """Refuse a DSN ``dsn_problem`` finds unusable.

    Raises:
        ConfigurationError: saying what is wrong, never quoting the DSN.
    """
    problem = dsn_problem(dsn)
    if problem is not None:
        raise ConfigurationError(problem)


def _split(dsn: str) -> SplitResult:
    try:
        return urlsplit(dsn)
    except ValueError as exc:  # an unbalanced [ or ]: never the DSN quoted
        msg = f"the PostgreSQL DSN is not a URL ({exc})"
        raise ConfigurationError(msg) from None


def without_secrets(text: str, dsn: str) -> str:
    """``text`` (a driver's error about ``dsn``) with the DSN's passwords, as written
    and percent-decoded, replaced by ``***``."""
    try:
        parts = urlsplit(dsn)
    except ValueError:
        return text if "@" not in dsn else "(a message that may quote the DSN)"
    secrets = [parts.password or ""]
    secrets += [v for k, v in parse_qsl(parts.query, keep_blank_values=True)
                if k.lower() in SECRET_PARAMETERS]
    for secret in sorted({s for raw in secrets for s in (raw, unquote(raw)) if s},
                         key=len, reverse=True):
        text = text.replace(secret, "***")
    return text
