"""How a running turn's replays and local loops fit the model's context window: the
history checked (and trimmed) before each request, and what the chat learnt of its
tokens and window.

``TurnFit`` is ``TurnRun``'s context-fitting half (a mixin: the run's ``history``,
``scale``, ``window`` and ``trimmed`` are its state), kept apart so the run's working
memory and its fitting read on their own. A cursor turn calls none of it.
"""

from __future__ import annotations

import json
import math

from turnstate.core._compaction import compaction_chars, history_from_compaction
from turnstate.core._context import OverflowPolicy, part_chars
from turnstate.core._conversation import Message, Part
from turnstate.core._history_facts import HistoryFacts, facts_for, fit_counted
from turnstate.core._json import JsonObject
from turnstate.core._media_fit import fit_history_media
from turnstate.core._overflow import Calibration, CalibrationKey, ContextFit, fit_context
from turnstate.core._registry import ModelInfo
from turnstate.core._replay_roles import alternating_history
from turnstate.core._tool_pairs import paired_history
from turnstate.engine._turn_input import TurnInput
from turnstate.engine._user_media import UserMedia
from turnstate.states._machine import TurnModel
from turnstate.storage._protocol import TurnLease

OVERFLOW_REASON = "context_overflow"
OVERFLOW_REPLAY_RATIO = 0.70
"""What a replay after ``context_overflow`` trims to, as a share of the model's window:
the top of the ``normal`` band, so the fresh cursor has room to grow for many turns
before the next trim, and the 4-characters-per-token estimate has margin below the
provider's own count."""


class TurnFit:
    """The context-fitting half of ``TurnRun`` (see the module docstring)."""

    turn: TurnInput
    lease: TurnLease
    media: UserMedia
    model_info: ModelInfo
    machine_model: TurnModel
    history: tuple[Message, ...] | None
    parts: list[Part]
    metadata: JsonObject
    scale: float
    window: int | None
    sent_tokens: int
    trimmed: int
    refused: bool

    def fit_context(self) -> ContextFit:
        """Check the replayed history against the model's context window before a replay
        or local-loop request (``turnstate.core._overflow``). When the request opted in
        to trimming and a trim makes it fit, ``history`` loses its oldest whole turns
        and the audit records the cut (``contextTrimmed``). Past a compaction point of
        this provider and model only what follows it counts, and a trim drops the oldest
        whole turns after it (the compacting message stays: the provider's summary).
        After ``context_overflow`` or a refusal as too long the history is trimmed
        whatever the policy, to ``OVERFLOW_REPLAY_RATIO`` of the window, or to the whole
        window when the newest turn alone needs more."""
        history = self._loaded_history()
        other = (len(self.turn.system_prompt) + len(self.turn.user_text)
                 + self.media.chars + part_chars(self.parts)
                 + sum(len(json.dumps(t.spec.parameters)) for t in self.turn.tools))
        policy, checked = self.turn.context.overflow, history
        limit = self.model_info.context_limit
        if self.window is not None and self.window < limit:
            limit = self.window
        cut = history_from_compaction(history, self.turn.provider, self.turn.model)
        if cut is not None:
            head, checked = cut
            other += compaction_chars(head[:1]) + part_chars(head[1:])
        facts = facts_for(history)  # counted by the history cache: read, not counted
        if self.refused or self.overflowed():  # the window refused it: trim, with room
            policy = OverflowPolicy.TRIM
            fit = _fit(history, checked, facts, other=other, policy=policy, scale=self.scale,
                       limit=math.floor(limit * OVERFLOW_REPLAY_RATIO))
            if fit.fits:
                return self._media_fitted(self._trimmed(history, checked, fit))
        fit = _fit(history, checked, facts, other=other, policy=policy, scale=self.scale,
                   limit=limit)
        return self._media_fitted(self._trimmed(history, checked, fit))

    def _media_fitted(self, fit: ContextFit) -> ContextFit:
        """The request's history with its oldest inline media left out where all of
        it would pass the provider's request limits (``core._media_fit``), with any tool
        call or result an edit left unpaired left out (``core._tool_pairs``), and laid
        out user first, roles alternating, no blank message (``core._replay_roles``);
        the audit counts them (``mediaOmitted``, ``unpairedToolParts``,
        ``replayGaps``, ``blankMessages``)."""
        history = self._loaded_history()
        facts = facts_for(history)  # the cache's figures: the messages to look at
        fitted, omitted = fit_history_media(history, self.media.held(), self.model_info,
                                            candidates=None if facts is None else facts.media)
        # a media part left out changes a question only: answers pair as they did, and
        # a question with an image is no blank one with its omitted text either
        paired, unpaired = (fitted, 0) if facts is not None and not facts.unpaired \
            else paired_history(fitted)
        shaped, gaps, blanks = (paired, 0, 0) if facts is not None and facts.laid_out \
            else alternating_history(paired)
        for key, count in (("mediaOmitted", omitted), ("unpairedToolParts", unpaired),
                           ("replayGaps", gaps), ("blankMessages", blanks)):
            if count:
                self.metadata[key] = count
        if shaped is not history:
            self.history = shaped
        return fit

    def _trimmed(self, history: tuple[Message, ...], checked: tuple[Message, ...],
                 fit: ContextFit) -> ContextFit:
        """Take ``fit`` of ``checked`` (``history``, or its end past a compaction point):
        the request's estimate, and its cut when it trims and fits."""
        self.sent_tokens = fit.estimated_tokens
        if fit.dropped and fit.fits:
            self.trimmed += fit.dropped
            trim: JsonObject = {**fit.audit(checked), "droppedMessages": self.trimmed}
            if self.scale != 1.0:
                trim["tokenScale"] = round(self.scale, 3)
            self.metadata["contextTrimmed"] = trim
            kept = len(history) - len(checked)  # up to the compacting message, if any
            self.history = history[:kept] + checked[fit.dropped:]
        return fit

    @property
    def calibration_key(self) -> CalibrationKey:
        return self.lease.chat_id, self.turn.provider, self.turn.model

    @property
    def calibration(self) -> Calibration:
        """What the turn learnt of the chat's tokens and window (``_steps._refused``)."""
        return Calibration(scale=self.scale, window=self.window)

    def recall(self, learnt: Calibration) -> None:
        """Take what the chat learnt before (a window said this turn, by a refused
        cursor, wins when smaller)."""
        self.scale = learnt.scale
        if learnt.window is not None and (self.window is None or learnt.window < self.window):
            self.window = learnt.window

    def may_retrim(self) -> bool:
        """A replay or local loop the provider refused as too long may be sent again
        trimmed more: the turn opted in to trimming, or replays after ``context_overflow``
        (table rule 10)."""
        return self.turn.context.overflow is OverflowPolicy.TRIM or self.overflowed()

    def overflowed(self) -> bool:
        """The turn degraded because the cursor's conversation outgrew the window
        (``context_overflow``, as the degradation or as the reason of a loss with tool
        results in flight). Read once per replay, never on a cursor turn."""
        return any(step.reason == OVERFLOW_REASON for step in self.machine_model.path)

    def _loaded_history(self) -> tuple[Message, ...]:
        if self.history is None:  # pragma: no cover - the driver loads it before the call
            msg = "a replay call needs the history, which was not loaded"
            raise RuntimeError(msg)
        return self.history


def _fit(history: tuple[Message, ...], checked: tuple[Message, ...], facts: HistoryFacts | None,
         *, other: int, policy: OverflowPolicy, scale: float, limit: int) -> ContextFit:
    """``fit_context`` of ``checked`` (``history``'s tail), read off ``facts`` when the
    history carries them."""
    if facts is None:
        return fit_context(checked, other_chars=other, policy=policy, context_limit=limit,
                           scale=scale)
    return fit_counted(facts, len(history) - len(checked), other_chars=other, policy=policy,
                       context_limit=limit, scale=scale)
