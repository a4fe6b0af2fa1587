"""What ``provider_batches`` does once per call, not more (issue 26): how it reads its
transport is worked out once, and the request gets its budget in one constructor call."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import attrs
import pytest

from tests.helpers import record_calls
from turnstate.core._errors import ProviderError
from turnstate.providers import _boundary
from turnstate.providers._boundary import provider_batches
from turnstate.providers._protocol import (
    AttemptBudget,
    ErrorClassifier,
    HttpRequest,
    ProviderResponse,
    SseEvent,
)
from turnstate.providers._transport import AiohttpTransport
from turnstate.providers.openai_responses import OpenAIResponsesAdapter

FRAMES = [
    SseEvent(event="response.output_text.delta",
             data='{"type":"response.output_text.delta","output_index":0,"delta":"Hi"}'),
    SseEvent(event="response.completed",
             data='{"type":"response.completed","response":{"id":"resp_1","output":[]}}'),
]


class Finishing:
    """Reads in batches and takes ``True`` sent as "the call is complete"."""

    FINISHES_ON_SEND = True

    def __init__(self) -> None:
        self.completed = 0

    async def stream(self, request: HttpRequest, classify: ErrorClassifier
                     ) -> AsyncGenerator[SseEvent, None]:
        for event in FRAMES:
            yield event

    async def stream_batches(self, request: HttpRequest, classify: ErrorClassifier
                             ) -> AsyncGenerator[list[SseEvent], bool | None]:
        if (yield list(FRAMES)):
            self.completed += 1

    async def before_restart(self, restarts: int, error: ProviderError) -> bool:
        return False


class StreamAlone(Finishing):
    """Overrides ``stream`` alone: read through it, event by event, never told."""

    async def stream(self, request: HttpRequest, classify: ErrorClassifier
                     ) -> AsyncGenerator[SseEvent, None]:
        for event in FRAMES:
            yield event


def test_how_a_transport_is_read_follows_the_class_that_defines_it() -> None:
    assert _boundary._reading(AiohttpTransport) == _boundary._FINISHING
    assert _boundary._reading(Finishing) == _boundary._FINISHING
    assert _boundary._reading(StreamAlone) == _boundary._ONE_BY_ONE

    class Quiet(Finishing):  # its own stream_batches and stream, not saying it finishes
        stream = Finishing.stream
        stream_batches = Finishing.stream_batches

    assert _boundary._reading(Quiet) == _boundary._BATCHES


@pytest.mark.parametrize(("transport", "completed"), [(Finishing(), 1), (StreamAlone(), 0)])
async def test_a_call_works_out_how_to_read_its_transport_once(
        monkeypatch: pytest.MonkeyPatch, transport: Finishing, completed: int) -> None:
    """Once per call (it walked the transport class's MRO four times: twice to choose
    ``stream_batches``, twice more to decide whether to send ``True``)."""
    calls = record_calls(monkeypatch, _boundary._reading, (_boundary, "_reading"))
    adapter = OpenAIResponsesAdapter(api_key="sk-test")
    request = HttpRequest(method="POST", url="http://x/v1/responses", headers={}, body=b"{}")
    items = [item async for item in provider_batches(transport, adapter, request)]
    assert isinstance(items[-1], ProviderResponse) and items[-1].response_id == "resp_1"
    assert calls == [type(transport)] and transport.completed == completed


def test_the_budgeted_request_is_the_evolved_one_field_by_field() -> None:
    """``_budgeted`` is ``attrs.evolve(request, budget=...)`` without evolve: every
    field of ``HttpRequest`` is carried over (a field added later fails here)."""
    request = HttpRequest(method="PUT", url="https://example.test/v1", body=b'{"a":1}',
                          headers={"authorization": "Bearer k"}, provider="openai",
                          budget=AttemptBudget())
    budget = AttemptBudget()
    made, evolved = _boundary._budgeted(request, budget), attrs.evolve(request, budget=budget)
    for field in attrs.fields(HttpRequest):
        assert getattr(made, field.name) is getattr(evolved, field.name), field.name
    assert made.budget is budget
