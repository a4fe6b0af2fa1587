"""A request's ``tool_choice`` obeyed by the scripted model, as the real APIs document it.

``none``: the model answers in text, whatever its script said (OpenAI "the model will not
call any tool"; Anthropic ``none``; Gemini ``none``). ``required`` (Anthropic ``any``,
Gemini ``any``): it calls at least one tool: the scripted calls when there are some, else
the first tool the request offers. A tool's name (OpenAI's ``{"type": "function", ...}``,
Anthropic's ``{"type": "tool", "name"}``, Gemini's ``allowed_tools`` with one tool): it
calls that tool, and only that one (the scripted calls of it, else one with example
arguments). A forced reply says no text beside its calls (Anthropic prefills the
assistant turn to force the tool: no text block comes before the ``tool_use``).
``auto``, an absent choice or a name the request does not offer leave the reply as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from turnstate.core._json import compact_json
from turnstate.emulators._conversation_model import Reply, ScriptedCall, example_arguments

NO_TOOL_TEXT = "I will answer without calling a tool."
"""The text of a reply whose script called tools under ``tool_choice`` ``none`` and said
nothing else."""


def obeying_tool_choice(reply: Reply, tools: Mapping[str, Mapping[str, Any]],
                        choice: Any) -> Reply:
    """``reply`` as the request's ``choice`` (``emulators._settings``' neutral value:
    ``auto`` / ``none`` / ``required`` / a tool's name) lets the model answer."""
    if choice is None or choice == "auto" or not isinstance(choice, str):
        return reply
    if choice == "none":
        if not reply.calls:
            return reply
        return attrs.evolve(reply, calls=(), partial_call=False,
                            text=reply.text or NO_TOOL_TEXT)
    if not tools:
        return reply
    if choice == "required":
        if reply.calls:
            return attrs.evolve(reply, text="", refusal=None, sources=())
        name = next(iter(tools))
    elif choice in tools:
        name = choice
    else:
        return reply  # a name not offered: the real APIs refuse the request
    calls = tuple(c for c in reply.calls if c.name == name) or (ScriptedCall(
        name=name, arguments=compact_json(example_arguments(tools[name]))),)
    return attrs.evolve(reply, text="", refusal=None, sources=(), calls=calls,
                        truncated=False, partial_call=False)
