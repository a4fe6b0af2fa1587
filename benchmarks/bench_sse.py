"""The SSE decoder is linear in the bytes it reads (issue 12, item 3).

Three 1 MiB inputs, each fed as 1-byte chunks and as 64 KiB chunks:
(a) a typical stream: ~100-byte ``data`` events;
(b) named frames as OpenAI Responses, Anthropic and Gemini send them: ``event:`` +
    ``data:``, ~160 bytes (the decoder's fast path for whole events in a chunk);
(c) one event whose single ``data`` line is 1 MiB long (the quadratic case of a decoder
    that rescans its pending buffer on every chunk).
Figures are nanoseconds per byte; a linear decoder's per-byte cost does not grow with
the input, so (b) at 2 MiB costs about what it costs at 1 MiB per byte. Timings on a
shared 2-core machine are noisy; compare the ratios.

Run: ``python benchmarks/bench_sse.py``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._util import figure, ratio
from turnstate.providers._sse import SseDecoder

MIB = 1 << 20


def typical(size: int) -> bytes:
    frame = b'data: {"type":"delta","text":"' + b"t" * 64 + b'"}\n\n'
    return frame * (size // len(frame))


def named(size: int) -> bytes:
    frame = (b"event: response.output_text.delta\n"
             b'data: {"type":"response.output_text.delta","sequence_number":5,'
             b'"item_id":"msg_1","output_index":0,"delta":"' + b"t" * 24 + b'"}\n\n')
    return frame * (size // len(frame))


def one_line(size: int) -> bytes:
    return b"data: " + b"x" * size + b"\n\n"


def ns_per_byte(raw: bytes, chunk: int) -> float:
    decoder = SseDecoder(max_line=8 * MIB)
    start = time.perf_counter_ns()
    events = 0
    for offset in range(0, len(raw), chunk):
        events += len(decoder.feed(raw[offset:offset + chunk]))
    elapsed = time.perf_counter_ns() - start
    assert events >= 1
    return elapsed / len(raw)


def main() -> None:
    for name, build in (("typical events", typical), ("named frames", named),
                        ("one 1 MiB line", one_line)):
        raw = build(MIB)
        byte = ns_per_byte(raw, 1)
        big = ns_per_byte(raw, 64 << 10)
        figure(f"sse {name}, 1 MiB as 1-byte chunks", byte, "ns/B")
        figure(f"sse {name}, 1 MiB as 64 KiB chunks", big, "ns/B")
        ratio(f"sse {name}: 1-byte / 64 KiB chunks", byte, big)
        double = ns_per_byte(build(2 * MIB), 1)
        ratio(f"sse {name}: per-byte cost at 2 MiB / at 1 MiB (1-byte chunks; linear ~1)",
              double, byte)


if __name__ == "__main__":
    main()
