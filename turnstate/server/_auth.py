"""Bearer tokens to owners, compared in constant time; never logged."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping


def _digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


class TokenBook:
    """Maps bearer tokens to owners.

    ``owner_of`` looks the candidate's SHA-256 digest up in a dict, then compares the
    token found with the candidate using ``hmac.compare_digest``: one lookup per request
    however many tokens the server holds (issue 26: the scan over every token was
    O(tokens) per request), and the time taken does not depend on how much of a token
    matched (the dict is keyed by digests a caller cannot steer byte by byte).
    """

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._entries = {_digest(token.encode("utf-8")): (token.encode("utf-8"), owner)
                         for token, owner in tokens.items()}

    def __repr__(self) -> str:
        return f"TokenBook({len(self._entries)} tokens)"

    def owner_of(self, candidate: str) -> str | None:
        given = candidate.encode("utf-8", "surrogatepass")
        token, owner = self._entries.get(_digest(given), (b"", None))
        return owner if hmac.compare_digest(token, given) and owner is not None else None

    def owner_for_header(self, header: str | None) -> str | None:
        """The owner of an ``Authorization: Bearer TOKEN`` header, else None."""
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self.owner_of(token.strip())
