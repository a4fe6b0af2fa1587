"""What a turn is asked (``TurnInput``), checked as it is built, and the turn ids.

``TurnInput`` is the embedder's request for one user turn; ``turn_context`` is what the
continuation is decided in. ``new_turn_id`` draws the ids of turns given none.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import TypeVar

import attrs

from turnstate.core._content import (
    NOT_GIVEN,
    content_problem,
    content_text,
    inline_data_urls,
    shorthand_problem,
)
from turnstate.core._context import ContextSettings, Severity
from turnstate.core._conversation import TextPart, Tool, UserPart
from turnstate.core._decisions import TurnContext
from turnstate.core._errors import InvalidInput
from turnstate.core._frozen import slot_maker
from turnstate.core._generation import NO_SETTINGS, GenerationSettings
from turnstate.core._hashing import system_prompt_hash, toolset_hash
from turnstate.storage._expected import CutExpected

DEFAULT_TOOL_ITERATION_LIMIT = 8

DEFAULT_CONTEXT = ContextSettings()
"""A turn's context settings when it gives none: one frozen value shared by every turn
(a factory built two objects per ``TurnInput``)."""

_UUID4_CLEAR = ~(0xF000 << 64 | 0xC000 << 48)  # the version nibble, the variant bits
_UUID4_SET = 0x4000 << 64 | 0x8000 << 48  # version 4, variant RFC 4122


MAX_CLIENT_KEY = 255
"""The longest ``TurnInput.client_key`` (characters): an AI SDK message id is 16, a UUID
36; a Stripe-style idempotency key is at most 255."""


def client_key_problem(key: object) -> tuple[str, str] | None:
    """Why ``key`` cannot be a ``TurnInput.client_key``, or None: 1 to ``MAX_CLIENT_KEY``
    printable ASCII characters (what an HTTP header carries)."""
    if type(key) is str and 0 < len(key) <= MAX_CLIENT_KEY and key.isascii() \
            and key.isprintable():
        return None
    got = f"{len(key)} characters" if isinstance(key, str) else type(key).__name__
    return "client_key", (f"must be None or 1 to {MAX_CLIENT_KEY} printable ASCII "
                          f"characters, got {got}")


_RANDOM_IDS = 64
"""Turn ids drawn from one ``os.urandom`` call (a system call per id cost more than the
id's formatting)."""


_SPLIT = struct.Struct("16s" * _RANDOM_IDS).unpack
"""One read's bytes as its ids' 16 each, in one C call."""


class _RandomBytes:
    """``os.urandom`` read ``_RANDOM_IDS`` ids at a time; dropped in a forked child, so
    parent and child never hand out the same bytes.

    The ids' bytes are handed out by a tuple iterator, whose ``next`` is one C call: two
    threads never get the same bytes, wherever one is switched out (an offset read and
    written back in Python let two threads take one id's bytes). Two threads refilling
    at once each take from their own read; the one stored last serves the next ids."""

    __slots__ = ("chunks",)

    def __init__(self) -> None:
        self.chunks: Iterator[bytes] = iter(())

    def take16(self) -> bytes:
        chunk = next(self.chunks, None)
        if chunk is None:
            block = os.urandom(16 * _RANDOM_IDS)
            chunks = iter(_SPLIT(block))
            self.chunks = chunks
            chunk = next(chunks)
        return chunk

    def drop(self) -> None:
        self.chunks = iter(())


_random = _RandomBytes()
if hasattr(os, "register_at_fork"):  # pragma: no branch - POSIX
    os.register_at_fork(after_in_child=_random.drop)


def new_turn_id() -> str:
    """A random version-4 UUID as 32 hex digits, as ``uuid.uuid4().hex`` writes it,
    without building the ``UUID`` object (a third of the time), from ``os.urandom``
    bytes read for many ids at once."""
    value = int.from_bytes(_random.take16(), "big") & _UUID4_CLEAR | _UUID4_SET
    return f"{value:032x}"


_text_part: Callable[[str, str | None, tuple[()]], TextPart] = slot_maker(TextPart)
_context: Callable[[str, str, str, str, int | None, datetime | None, bool, bool],
                   TurnContext] = slot_maker(TurnContext)
_CRITICAL = Severity.CRITICAL.value


def is_critical(context_state: str | None) -> bool:
    """Whether a stored ``last_context_state`` has the ``critical`` severity. One
    substring test per turn (issue 26), no JSON parse: the snapshot's only words are its
    severity and its source (``provider`` / ``estimate``), so the word in the stored text
    is the severity, however the store spaced the JSON."""
    return context_state is not None and _CRITICAL in context_state

_Item = TypeVar("_Item")


def _tools(value: Iterable[Tool]) -> tuple[Tool, ...]:
    return _sequence(value, "tools", "Tool objects")


def _content(value: Iterable[UserPart]) -> tuple[UserPart, ...]:
    parts = _sequence(value, "content", "TextPart, ImagePart or FilePart parts")
    return inline_data_urls(parts) if parts else parts


def _sequence(value: Iterable[_Item], field: str, items: str) -> tuple[_Item, ...]:
    """``value`` as a tuple; None or one item given bare is ``InvalidInput`` naming
    ``field`` (it was a ``TypeError`` from ``tuple``)."""
    try:
        return tuple(value)
    except TypeError:
        problem = f"must be a sequence of {items}, got {type(value).__name__}"
        raise InvalidInput(field, problem) from None


@attrs.frozen(kw_only=True)
class TurnInput:
    """One user turn, as a chat server asks for it.

    Attributes:
        provider: registry name of the provider to use.
        model: the model name.
        tools: tools the model may call (name, description, JSON-schema parameters,
            async handler, timeout).
        context: compaction and context settings for this request.
        tool_iteration_limit: the most tool iterations before the turn aborts.
        deadline_seconds: how long this turn may run, counted from when its begin was
            sent, before it ends ``aborted`` with reason ``deadline_exceeded`` (a positive
            number of seconds; ``inf``: no deadline). None takes the engine's
            ``TurnLimits.turn_seconds``.
        turn_id: an id for the turn (generated when None): 1 to ``MAX_TURN_ID`` (128)
            printable ASCII characters, no space (else ``InvalidInput``, before the lease).
        owner: when given, the chat must belong to this owner: another owner's chat is
            ``ChatNotFound``, exactly as a missing one (checked by the store when the
            turn loads the chat and takes its lease).
        settings: how the model generates this turn's answer (``GenerationSettings``:
            output limit, sampling, reasoning effort or budget, tool choice, ...);
            checked against the registry before the lease, never part of the envelope.
        recover_tool_results: when the provider loses the cursor while tool results are
            in flight, replay the history with this turn's calls and results instead of
            aborting with ``tool_result_cursor_loss``. None takes the engine's default.
        content: the user's message as parts: ``TextPart``, ``ImagePart`` (an https URL
            or inline bytes with their media type) and ``FilePart`` (a PDF, inline or
            by URL), in order. Give either ``content`` or ``user_text``.
        user_text: the one-text shorthand (``content=(TextPart(text=...),)``); with
            ``content`` given, it reads as the content's text parts joined (so
            ``attrs.evolve`` of a turn with content keeps working).
        replace_from: an "edit and regenerate": the seq of a stored message that this
            turn's question replaces. The turn's begin deletes that message and every
            later one in the same write that takes the lease (``TurnStart.replace_from``),
            so a refused turn (``ChatBusy``, ``MessageNotFound``) deletes nothing and no
            other turn can take the chat in between. None: nothing is deleted.
        client_key: the client's key for this question (an HTTP ``Idempotency-Key``, the
            AI SDK's user message id): 1 to ``MAX_CLIENT_KEY`` (255) printable ASCII
            characters. The store records it with the turn, unique in its chat; a turn
            whose key a turn of the chat already holds does not run: its begin raises
            ``TurnKeyRecorded`` naming that turn (follow or read it instead). None: no key.
        expect: with ``replace_from``, what the begin is to find there, compared in its
            write (``turnstate.storage.CutExpected``: the message at that seq as read,
            ``MessageChanged`` otherwise; the turn holding ``client_key`` as read,
            ``TurnKeyRecorded`` otherwise). None: nothing compared.

    Raises:
        InvalidInput: both ``user_text`` (other than the content's text) and ``content``
            given, or neither; a part that is not a user part, a non-https URL, an
            unknown media type or empty data (the field names the part:
            ``content[1].url``); a ``replace_from`` that is not a positive ``int`` (a
            bool included); a ``client_key`` that is not such a string. The inline-bytes
            bound, a message of nothing but whitespace (no image, no file) and the
            model's input types are checked by the engine, also before the lease.
    """

    provider: str
    model: str
    system_prompt: str
    content: tuple[UserPart, ...] = attrs.field(default=(), converter=_content)
    user_text: str = NOT_GIVEN
    tools: tuple[Tool, ...] = attrs.field(default=(), converter=_tools)
    context: ContextSettings = attrs.field(default=DEFAULT_CONTEXT)
    tool_iteration_limit: int = DEFAULT_TOOL_ITERATION_LIMIT
    turn_id: str | None = None
    owner: str | None = None
    recover_tool_results: bool | None = None
    settings: GenerationSettings = attrs.field(default=NO_SETTINGS)
    replace_from: int | None = None
    client_key: str | None = None
    deadline_seconds: float | None = None
    expect: CutExpected | None = None

    def __attrs_post_init__(self) -> None:
        given = self.user_text is not NOT_GIVEN
        problem = content_problem(self.content) or shorthand_problem(
            self.content, self.user_text if given else None)
        cut = self.replace_from
        if problem is None and cut is not None and (type(cut) is not int or cut < 1):
            problem = "replace_from", ("must be a positive whole number (a message's seq) "
                                       f"or None, got {cut!r}")
        if problem is None and self.client_key is not None:
            problem = client_key_problem(self.client_key)
        if problem is None and self.expect is not None and cut is None:
            problem = "expect", "names what a cut finds: give it with replace_from"
        if problem is not None:
            raise InvalidInput(*problem)
        if not given:  # frozen: set once, here, to the content's text
            object.__setattr__(self, "user_text", content_text(self.content))

    @property
    def user_parts(self) -> tuple[UserPart, ...]:
        """The user's message as parts: ``content``, or the one text part of
        ``user_text``."""
        return self.content or (_text_part(self.user_text, None, ()),)  # text, phase, citations

    def turn_context(self, committed_seq: int | None, now: datetime, *,
                     tools_digest: str | None = None,
                     context_state: str | None = None) -> TurnContext:
        """The context the continuation is decided in; ``tools_digest``: the toolset's
        digest when the caller took it already (``check_input`` does); ``context_state``:
        the chat's ``last_context_state`` as stored."""
        if tools_digest is None:
            tools_digest = toolset_hash([t.spec.as_mapping() for t in self.tools])
        # provider, model_name, system_prompt_hash, toolset_hash, committed_seq, now,
        # context_critical, provider_compaction
        return _context(self.provider, self.model, system_prompt_hash(self.system_prompt),
                        tools_digest, committed_seq, now, is_critical(context_state),
                        self.context.provider_compaction_enabled)
