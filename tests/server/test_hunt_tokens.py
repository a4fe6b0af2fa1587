"""A ``#`` inside a token is part of it: the tokens file's comments start at the start of
a line or after a space (cutting at any ``#`` accepted a shorter token than the operator
wrote: ``alice: ab#cdef`` let ``ab`` in)."""

from __future__ import annotations

from turnstate.server import TokenBook, parse_tokens


def test_a_hash_inside_a_token_is_part_of_it() -> None:
    tokens = parse_tokens("alice: ab#cdef\nbob: x#y # a note\n#carol: c1\n\tdave: d1\t#\n")
    assert tokens == {"ab#cdef": "alice", "x#y": "bob", "d1": "dave"}
    book = TokenBook(tokens)
    assert book.owner_of("ab") is None
    assert book.owner_of("ab#cdef") == "alice"
