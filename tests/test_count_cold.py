"""``count_cold``'s reading of callgrind output: self costs per function, with the
format's name compression, relative positions and call lines (issue 26)."""

from __future__ import annotations

from benchmarks.count_cold import parse_callgrind

OUTPUT = """\
# callgrind format
version: 1
creator: callgrind-3.19.0
cmd: python count_cold.py --inner m 5 sweep=yes
positions: line
events: Ir I1mr D1mr D1mw ILmr DLmr DLmw

ob=(1) /usr/lib/libpython3.11.so
fl=(1) Python/ceval.c
fn=(1) _PyEval_EvalFrameDefault
10 100 1 2 0 1 1 0
+2 50 0 1 1
cob=(2) /lib/_json.so
cfl=(2) Modules/_json.c
cfn=(2) scanner_call
calls=3 40
* 900 9 9 9 9 9 9
-1 7
ob=(2)
fl=(2)
fn=(2)
40 800 8 8 8 8 8 8
fn=(1)
ob=(1)
12 3 0 0 0 0 0 1

totals: 1000
"""


def test_self_costs_skip_call_lines_and_resolve_compressed_names() -> None:
    events, costs = parse_callgrind(OUTPUT.splitlines(keepends=True))
    assert events == ["Ir", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw"]
    python = ("/usr/lib/libpython3.11.so", "_PyEval_EvalFrameDefault")
    json = ("/lib/_json.so", "scanner_call")
    # 100 + 50 + 7 + 3: the 900 after ``calls=`` is the callee's inclusive cost
    assert costs[python] == [160, 1, 3, 1, 1, 1, 1]
    # short cost lines count zero for the events they leave out
    assert costs[json] == [800, 8, 8, 8, 8, 8, 8]
    assert set(costs) == {python, json}


def test_instruction_positions_are_not_read_as_costs() -> None:
    text = OUTPUT.replace("positions: line", "positions: instr line").replace(
        "10 100 1 2 0 1 1 0", "0x10 10 100 1 2 0 1 1 0")
    text = text.replace("+2 50 0 1 1", "+4 +2 50 0 1 1").replace("-1 7", "+1 -1 7")
    text = text.replace("40 800", "0x40 40 800").replace("12 3 0", "0x12 12 3 0")
    text = text.replace("* 900", "* * 900")
    _, costs = parse_callgrind(text.splitlines(keepends=True))
    assert costs["/usr/lib/libpython3.11.so", "_PyEval_EvalFrameDefault"][0] == 160
