"""Bearer tokens to owners, compared in constant time; never logged."""

from __future__ import annotations

import hmac
from collections.abc import Mapping


class TokenBook:
    """Maps bearer tokens to owners.

    ``owner_of`` compares the candidate with every known token using
    ``hmac.compare_digest`` and does not stop at a match, so the time it takes does not
    depend on which token (or how much of one) matched.
    """

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._entries = tuple((token.encode("utf-8"), owner) for token, owner in tokens.items())

    def __repr__(self) -> str:
        return f"TokenBook({len(self._entries)} tokens)"

    def owner_of(self, candidate: str) -> str | None:
        given = candidate.encode("utf-8", "surrogatepass")
        found: str | None = None
        for token, owner in self._entries:
            if hmac.compare_digest(token, given):
                found = owner
        return found

    def owner_for_header(self, header: str | None) -> str | None:
        """The owner of an ``Authorization: Bearer TOKEN`` header, else None."""
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self.owner_of(token.strip())
