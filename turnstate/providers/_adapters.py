"""What the adapters share: durable ones keep no loop; stateless ones no cursor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import ClassVar

from turnstate.core._conversation import ToolResultPart
from turnstate.core._decisions import TurnContext
from turnstate.core._envelope import ContinuationEnvelope, Mode
from turnstate.core._errors import ProviderError
from turnstate.core._json import JsonObject
from turnstate.providers._common import standard_envelope
from turnstate.providers._protocol import ProviderCall, ProviderResponse


class DurableAdapter:
    """The provider keeps the tool loop (the next call chains on the newest response id)
    and the envelope names that id. Subclasses set the class constants, ``base_url``,
    and implement ``build_request``, ``stream_parser`` and ``_classify``."""

    PROVIDER: ClassVar[str]
    MODE: ClassVar[Mode]
    PATH: ClassVar[str]
    base_url: str

    @property
    def provider(self) -> str:
        return self.PROVIDER

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + self.PATH

    def classify_error(
        self, status: int, headers: Mapping[str, str], body: bytes
    ) -> ProviderError:
        return self._classify(status, headers, body)

    def _classify(self, status: int, headers: Mapping[str, str], body: bytes) -> ProviderError:
        raise NotImplementedError

    def extend_loop(
        self,
        call: ProviderCall,
        response: ProviderResponse,
        results: Sequence[ToolResultPart],
    ) -> tuple[JsonObject, ...]:
        return ()  # the server keeps the loop

    def envelope(
        self,
        ctx: TurnContext,
        response: ProviderResponse,
        *,
        loop_messages: tuple[JsonObject, ...],
        now: datetime,
        covers_seq: int,
    ) -> ContinuationEnvelope:
        return standard_envelope(ctx, self.MODE, response, loop_messages=(),
                                 now=now, covers_seq=covers_seq)


class StatelessAdapter:
    """The provider keeps nothing: every turn replays, and the tool loop's messages ride
    in a ``stateless-loop`` state that ``decide_turn_persistence`` never lets through."""

    def envelope(
        self,
        ctx: TurnContext,
        response: ProviderResponse,
        *,
        loop_messages: tuple[JsonObject, ...],
        now: datetime,
        covers_seq: int,
    ) -> ContinuationEnvelope:
        return standard_envelope(ctx, Mode.STATELESS_LOOP, response, loop_messages=loop_messages,
                                 now=now, covers_seq=covers_seq)
