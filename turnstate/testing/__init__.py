"""What an embedder needs to test against turnstate: the store conformance suite and the
provider emulators (no keys, no network). Needs pytest and pytest-asyncio.

* ``StoreConformance``: subclass it with ``make_store(clock)`` to run the conformance
  suite on your own ``Store`` (docs/api.md, "Write your own store").
* ``emulated_providers``: a pytest fixture that starts the five emulators on loopback
  and yields ``EmulatedProviders`` (``.adapters`` for ``TurnEngine``, ``.emulators`` to
  queue faults and read the requests); import it into your ``conftest.py``.
* ``emulated_engine``: a fixture giving a ``TurnEngine`` on a fresh ``MemoryStore`` and
  the emulators (import it with ``emulated_providers``); ``turn_events(iterator)``: a
  turn's events as a list, iterated inside ``aclosing``.
* The emulators themselves, re-exported from ``turnstate.emulators``.
"""

from turnstate.emulators import (
    ChainedEmulator,
    EmulatedProviders,
    EmulatorServer,
    Fault,
    Reply,
    ScriptedCall,
    ScriptedModel,
)
from turnstate.testing._fixtures import emulated_engine, emulated_providers, turn_events
from turnstate.testing._records import ManualClock
from turnstate.testing._store_suite import StoreConformance, counters_match_history

__all__ = [
    "ChainedEmulator",
    "EmulatedProviders",
    "EmulatorServer",
    "Fault",
    "ManualClock",
    "Reply",
    "ScriptedCall",
    "ScriptedModel",
    "StoreConformance",
    "counters_match_history",
    "emulated_engine",
    "emulated_providers",
    "turn_events",
]
