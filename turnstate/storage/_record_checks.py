"""The checks a store makes on what it is given before a write: a listing's limit, a new
chat's id, owner and chat cap, a title, and text that UTF-8 cannot encode."""

from __future__ import annotations

from turnstate.core._errors import ConfigurationError, InvalidInput, StorageError

MAX_TITLE_CHARS = 200
"""A chat title's most characters (code points): the server's ``PATCH`` bound, kept by
every store's ``rename_chat`` so an embedder gets it too."""


def check_limit(limit: int | None) -> None:
    """A listing's ``limit``: None (everything) or a non-negative count."""
    if limit is not None and limit < 0:
        msg = f"limit must not be negative, got {limit}"
        raise ConfigurationError(msg)


def check_new_chat(chat_id: object, owner: object, max_chats: object = None) -> None:
    """``create_chat``'s arguments: strings UTF-8 can encode (an owner of None was stored
    by ``MemoryStore`` and refused by SQLite as "already exists"; a number raised a bare
    ``AttributeError``), an owner with some visible text (an empty or blank owner was
    stored, a chat nobody's sign-in names), and a ``max_chats`` of None or a whole number
    from 0.

    Raises:
        InvalidInput: naming ``owner``, ``chat_id`` or ``max_chats``.
    """
    for field, value in (("owner", owner), ("chat_id", chat_id)):
        if not isinstance(value, str):
            raise InvalidInput(field, f"must be a string, got {type(value).__name__}")
    if isinstance(owner, str) and not owner.strip():
        field, problem = "owner", "must not be empty or only whitespace"
        raise InvalidInput(field, problem)
    if max_chats is not None and (type(max_chats) is not int or max_chats < 0):
        field, problem = "max_chats", f"must be None or a whole number from 0, got {max_chats!r}"
        raise InvalidInput(field, problem)
    check_storable(chat_id, owner)  # type: ignore[arg-type]


def check_title(title: object) -> None:
    """``rename_chat``'s title: None or a string UTF-8 can encode, of at most
    ``MAX_TITLE_CHARS`` characters.

    Raises:
        InvalidInput: naming ``title``.
    """
    if title is not None and not isinstance(title, str):
        field, problem = "title", f"must be None or a string, got {type(title).__name__}"
        raise InvalidInput(field, problem)
    if title is not None and len(title) > MAX_TITLE_CHARS:
        field, problem = "title", f"is longer than {MAX_TITLE_CHARS} characters ({len(title)})"
        raise InvalidInput(field, problem)
    try:
        check_storable(title)
    except StorageError:
        field, problem = "title", "is not valid Unicode text"
        raise InvalidInput(field, problem) from None


def check_storable(*texts: str | None) -> None:
    """Refuse identifiers and labels that cannot be stored as UTF-8 text (lone surrogates)."""
    for text in texts:
        if text is not None and not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                msg = f"cannot store {text!r}: it is not valid Unicode text"
                raise StorageError(msg) from None
