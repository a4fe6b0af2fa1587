"""``turnstate release``: free a stuck chat, recording its running turn as ``released``.

For an operator: a chat whose node died answers ``chat_busy`` until its lease runs out
(30 s by default); this frees it now. A turn still running elsewhere finds its lease gone
at its next heartbeat or write and stops (``lease_lost``) without another side effect.
"""

from __future__ import annotations

import argparse
import asyncio

from turnstate.commands._common import Subparsers, existing_db, record_id, terminal_text
from turnstate.storage import open_store
from turnstate.storage._release import free_chat


def add_parser(commands: Subparsers) -> None:
    release = commands.add_parser(
        "release", help="free a chat's lease, recording its running turn as released")
    release.add_argument("db", metavar="DB", help="SQLite database file or postgresql:// DSN")
    release.add_argument("chat_id", metavar="CHAT_ID")


def run(args: argparse.Namespace) -> int:
    report = asyncio.run(release(existing_db(args.db), record_id(args.chat_id, "CHAT_ID")))
    print(terminal_text(report))
    return 0


async def release(db: str, chat_id: str) -> str:
    """What was released, as one line. Raises ``ChatNotFound``."""
    async with open_store(db, create=False) as store:  # never a schema in a wrong DB
        released = await free_chat(store, chat_id)
    record = released.record
    if released.turn_id is None:
        return f"chat {chat_id}: no turn holds it; nothing to release"
    if record is None:
        return (f"chat {chat_id}: released; its lease named turn {released.turn_id}, which "
                "has no record (its messages, if any, are aborted)")
    return (f"chat {chat_id}: released; turn {record.id} is {record.status.value}"
            + (f" ({record.reason})" if record.reason else ""))
