"""``turnstate inspect``: a chat's row, its envelope decoded, its context, its last turns."""

from __future__ import annotations

import argparse
import asyncio
import json

from turnstate.commands._common import Subparsers, existing_db, record_id, terminal_text
from turnstate.core._bill import sent_counts
from turnstate.core._conversation import TransitionPart
from turnstate.core._cost import audit_cost_text
from turnstate.core._envelope import parse_envelope, unstructure_envelope
from turnstate.core._errors import EnvelopeMalformed
from turnstate.storage import LeanMessage, open_store
from turnstate.storage._protocol import ChatRecord, TurnRecord

TURNS_SHOWN = 10


def add_parser(commands: Subparsers) -> None:
    inspect = commands.add_parser(
        "inspect", help="show a chat: row, envelope, last turns",
        description="Show one chat as stored: its row, its continuation envelope decoded, "
                    "its context and its last turns with their paths. Opens the database "
                    "read-only: never creates or migrates anything.")
    inspect.add_argument("db", metavar="DB", help="SQLite database file or postgresql:// DSN")
    inspect.add_argument("chat_id", metavar="CHAT_ID")


def run(args: argparse.Namespace) -> int:
    report = asyncio.run(inspect_chat(existing_db(args.db), record_id(args.chat_id, "CHAT_ID")))
    print(terminal_text(report))
    return 0


async def turn_path(db: str, turn_id: str) -> TurnRecord:
    """The recorded turn (its path included). Raises ``TurnNotFound``."""
    async with open_store(db, read_only=True) as store:
        return await store.load_turn(turn_id)


async def inspect_chat(db: str, chat_id: str) -> str:
    """A readable report of one chat. Raises ``ChatNotFound``."""
    async with open_store(db, read_only=True) as store:
        chat = await store.load_chat(chat_id)
        turns = await store.list_turns(chat_id, limit=TURNS_SHOWN)
        # without their media bytes: the report shows answers' transitions and usage
        messages = {m.seq: m for m in await store.list_messages_lean(chat_id)}
    lines = _chat_lines(chat)
    lines.append(f"last {len(turns)} turns (newest first):")
    for turn in turns:
        lines += _turn_lines(turn, messages.get(turn.assistant_seq))
    return "\n".join(lines)


def _chat_lines(chat: ChatRecord) -> list[str]:
    lines = [
        f"chat {chat.id} (owner {chat.owner}, version {chat.version})",
        f"  created {chat.created_at.isoformat()}  updated {chat.updated_at.isoformat()}",
        f"  active turn: {chat.active_turn_id or 'none'}"
        + (f" (lease until {chat.active_turn_expires_at.isoformat()})"
           if chat.active_turn_expires_at else ""),
        "  last_provider_state: " + _envelope_text(chat.last_provider_state),
        "  last_context_state: " + (chat.last_context_state or "none"),
    ]
    return lines


def _envelope_text(raw: str | None) -> str:
    if raw is None:
        return "none (the next durable turn replays)"
    try:
        envelope = parse_envelope(raw)
    except EnvelopeMalformed as exc:
        return f"unreadable ({exc.detail}); the next turn degrades with envelope_malformed"
    decoded = json.dumps(unstructure_envelope(envelope), indent=2, ensure_ascii=False)
    return "\n    ".join(decoded.splitlines())


def _turn_lines(turn: TurnRecord, assistant: LeanMessage | None) -> list[str]:
    states = [turn.path[0].source, *(s.dest for s in turn.path)] if turn.path else []
    lines = [
        f"  turn {turn.id}: {turn.status.value}, {turn.provider}/{turn.model}, "
        f"strategy {turn.strategy or '-'}"
        + (f", reason {turn.reason}" if turn.reason else ""),
        "    path: " + (" -> ".join(states) if states else "(none recorded)"),
    ]
    lines += [f"      {s.source} --{s.trigger}--> {s.dest}"
              + (f" [{s.reason}]" if s.reason else "") for s in turn.path]
    parts = assistant.parts if assistant is not None else ()
    for part in parts:
        if isinstance(part, TransitionPart):
            lines.append(f"    transition: {part.reason} from {part.source_state} -> "
                         f"{part.strategy}, recovered={str(part.recovered).lower()}")
    if assistant is not None and assistant.usage is not None:
        usage = assistant.usage
        lines.append(f"    usage: {usage.input_tokens:,} input tokens "
                     f"({usage.cached_input_tokens:,} read from the cache, "
                     f"{usage.cache_write_tokens:,} written), "
                     f"{usage.output_tokens:,} output; cost "
                     + audit_cost_text(assistant.provider_state))
    elif assistant is not None and assistant.provider_state is not None:  # billed, unknown
        lines.append("    usage: not reported; cost " + audit_cost_text(assistant.provider_state))
    if assistant is not None and assistant.provider_state is not None:
        lines.append("    sent: " + _sent_text(assistant.provider_state))
    if turn.detail:
        lines.append(f"    detail: {turn.detail}")
    return lines


def _sent_text(audit: str) -> str:
    """The audit's ``sent`` in words: calls, HTTP requests when retried, bytes."""
    try:
        metadata = json.loads(audit).get("metadata")
    except (ValueError, AttributeError):
        return "(audit unreadable)"
    requests, size, retries = sent_counts(metadata)
    text = f"{requests} provider call(s)"
    if retries:
        text += f" in {requests + retries} HTTP requests ({retries} retried)"
    return text + f", {size:,} bytes"
