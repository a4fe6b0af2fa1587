"""A tokens file is read up to a bound (attack8).

``serve --tokens /dev/zero`` (or any endless file: a device, ``/proc/kmsg``, a pipe
from a command that never stops) read it whole before parsing a line: the process
grew until the machine's memory ran out (under a 1.5 GB address-space limit it ended
``internal error: MemoryError``). A tokens file is now read up to
``MAX_TOKENS_FILE_BYTES`` (16 MiB, some 300,000 tokens), and a longer one is a one-line
error naming it; a pipe (``--tokens <(vault read ...)``) is still read to its end.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from turnstate.core._errors import ConfigurationError
from turnstate.server._config import MAX_TOKENS_FILE_BYTES, load_tokens


def test_an_endless_tokens_file_is_refused_naming_it() -> None:
    with pytest.raises(ConfigurationError, match="the tokens file /dev/zero is longer than"):
        load_tokens(Path("/dev/zero"))


def test_a_tokens_file_past_the_bound_is_refused(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    with tokens.open("wb") as handle:  # sparse: no disk taken
        handle.write(b"alice: a-token\n")
        handle.truncate(MAX_TOKENS_FILE_BYTES + 1)
    with pytest.raises(ConfigurationError, match=f"{MAX_TOKENS_FILE_BYTES:,} bytes"):
        load_tokens(tokens)


def test_a_pipe_is_read_to_its_end() -> None:
    read, write = os.pipe()
    lines = b"".join(f"owner{n}: token-{n:06d}\n".encode() for n in range(5_000))

    def writer() -> None:
        with os.fdopen(write, "wb") as out:
            out.write(lines)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        tokens = load_tokens(Path(f"/dev/fd/{read}"))
    finally:
        thread.join()
        os.close(read)
    assert len(tokens) == 5_000 and tokens["token-004999"] == "owner4999"
