"""The question's inline images and files, held only while a request is built (embed7).

A turn's begin stores its question with its media (``TurnStart.user_parts``), and no edit
or delete can touch the message while the turn holds the lease. So once a request that
carries them is built (its body holds their base64, which a retry sends again), the run
lets the decoded bytes go, and reads them back (``Store.load_media_part``; several in
one statement where the store has ``load_media_parts``, as PostgreSQL does) only for a
later request that sends the question again: every request of a local loop, a replay
after a lost cursor. A cursor's tool continuation sends its results alone and reads
nothing. While the provider answers, the process then holds the request body, not the
body and the image (2.4x a large image, memory7).

``UserMedia`` keeps what the rest of the turn needs without the bytes: the question's
media characters for the context estimate (``chars``) and which parts to read back.
"""

from __future__ import annotations

import attrs

from turnstate.core._context import media_chars
from turnstate.core._conversation import UserPart
from turnstate.core._decisions import Strategy
from turnstate.core._errors import StorageError
from turnstate.core._media import FilePart, ImagePart
from turnstate.engine._turn_input import TurnInput
from turnstate.providers._protocol import ProviderCall
from turnstate.states._guards import TurnFacts
from turnstate.states._table import State
from turnstate.storage._protocol import Store, TurnLease


class UserMedia:
    """The turn's question as parts, its inline media let go between requests.

    ``parts`` is the question as sent (``None`` in place of a part let go);
    ``inline`` the indexes of its inline images and files; ``chars`` their characters in
    the context estimate (``media_chars`` under the turn's provider), taken once."""

    __slots__ = ("chars", "inline", "parts")

    def __init__(self, content: tuple[UserPart, ...], provider: str) -> None:
        self.parts: tuple[UserPart | None, ...] = content
        self.inline = tuple(index for index, part in enumerate(content)
                            if isinstance(part, ImagePart | FilePart) and part.data is not None)
        self.chars = media_chars(content, provider) if self.inline or content else 0

    @property
    def released(self) -> bool:
        return any(self.parts[index] is None for index in self.inline)

    def held(self) -> tuple[UserPart, ...]:
        """The question's parts, every one present (after ``reload``)."""
        parts = tuple(part for part in self.parts if part is not None)
        assert len(parts) == len(self.parts), "the question's media were not read back"
        return parts

    def release(self) -> None:
        """Let the inline media go (their request is built)."""
        if self.inline:
            held = self.inline
            self.parts = tuple(None if index in held else part
                               for index, part in enumerate(self.parts))

    async def reload(self, store: Store, lease: TurnLease, owner: str | None) -> None:
        """Read the media let go back from the question the turn's begin stored.

        Raises:
            StorageError: the stored question has no such image or file at that index (a
                store that changed the question under the turn's lease).
        """
        parts = list(self.parts)
        missing = [index for index in self.inline if parts[index] is None]
        many = getattr(store, "load_media_parts", None)
        if len(missing) > 1 and callable(many):  # PostgreSQL: one statement, not one a part
            read = await many(lease.chat_id, lease.user_seq, missing, owner=owner)
        else:
            read = [await store.load_media_part(lease.chat_id, lease.user_seq, index,
                                                owner=owner) for index in missing]
        for index, part in zip(missing, read, strict=True):
            if part is None:
                msg = (f"the turn's question (seq {lease.user_seq}) has no image or file at "
                       f"index {index} in the store")
                raise StorageError(msg)
            parts[index] = part
        self.parts = tuple(parts)


def lean_turn(turn: TurnInput) -> TurnInput:
    """``turn`` without its content (the run keeps it in ``UserMedia``), so the turn's
    objects hold no decoded media; its ``user_text`` stays."""
    if not turn.content:
        return turn
    return attrs.evolve(turn, content=(), user_text=turn.user_text)


def releasable(store: object) -> bool:
    """Whether ``store`` can read a part back (``load_media_part``, docs/api.md rule 7);
    a store without it keeps the media for the turn, as before."""
    return callable(getattr(store, "load_media_part", None))


class TurnQuestion:
    """The question's half of ``TurnRun`` (a mixin, as ``TurnFit`` and ``TurnBill``):
    when its media are let go and read back."""

    media: UserMedia
    lease: TurnLease
    turn: TurnInput
    last_call: ProviderCall | None

    @property
    def current(self) -> State:
        raise NotImplementedError  # ``TurnRun``'s

    @property
    def facts(self) -> TurnFacts:
        raise NotImplementedError  # ``TurnRun``'s

    async def question_ready(self, store: Store) -> None:
        """Before the request of the current state: the question's media read back from
        the store when they were let go and this request sends the question again."""
        if self.media.released and self.needs_question(self.current):
            await self.media.reload(store, self.lease, self.turn.owner)

    def built(self, store: object) -> None:
        """The request of ``last_call`` is built (its body holds the question's media):
        the decoded media go, and the call kept for ``extend_loop`` holds none, when
        ``store`` can read them back."""
        call = self.last_call
        if call is not None and self.media.inline and releasable(store):
            self.media.release()
            self.last_call = attrs.evolve(call, user_parts=())

    def needs_question(self, state: State) -> bool:
        """Whether the request of ``state`` sends the question again: all but a cursor's
        tool continuation, which sends its results alone."""
        return not (state is State.CURSOR and self.facts.iterations_done)

    def question(self, strategy: Strategy, iteration: int) -> tuple[UserPart, ...]:
        """The question's parts for a request (none for a cursor's tool continuation,
        whose codec reads only its results; the media may be let go then)."""
        if strategy is Strategy.CURSOR and iteration:
            return ()
        return self.media.held()
