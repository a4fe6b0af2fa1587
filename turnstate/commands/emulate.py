"""``turnstate emulate PROVIDER``: one emulator in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal

from turnstate.commands._common import CliError, Subparsers, port_number
from turnstate.emulators._base import EmulatorServer
from turnstate.emulators._emulated import kind_of


def add_parser(commands: Subparsers) -> None:
    emulate = commands.add_parser(
        "emulate", help="serve one provider emulator until Ctrl-C",
        description="Serve one provider's emulator (its wire format, no keys, no network) "
                    "on loopback until Ctrl-C; point a client's base URL at it.")
    emulate.add_argument("provider", metavar="PROVIDER",
                         help="openai, gemini, openai-compatible, deepseek or anthropic")
    emulate.add_argument("--port", type=port_number, default=0, help="port (default: a free one)")


def run(args: argparse.Namespace) -> int:
    return serve_emulator(args.provider, port=args.port)


async def _serve(provider: str, port: int, stopped: asyncio.Event | None = None) -> None:
    kind = kind_of(provider)
    async with EmulatorServer(kind.emulator(), port=port) as server:
        print(f"{provider} emulator listening on {server.base_url}{kind.api_prefix} "
              "(Ctrl-C to stop)", flush=True)
        stop = stopped or asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    print(f"{provider} emulator stopped", flush=True)


def serve_emulator(provider: str, *, port: int = 0) -> int:
    """Serve until SIGINT/SIGTERM; returns exit status 0 on a clean stop."""
    kind_of(provider)  # an unknown provider fails before anything starts
    try:
        asyncio.run(_serve(provider, port))
    except OSError as exc:
        msg = f"cannot listen on port {port}: {exc.strerror or exc}"
        raise CliError(msg) from exc
    return 0
