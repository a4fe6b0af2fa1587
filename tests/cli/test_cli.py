"""The command line: demo, diagrams, emulate, inspect, and its error boundary."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from turnstate import diagrams
from turnstate.cli import main
from turnstate.states import TRANSITIONS

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "turnstate.cli", *args], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, check=False)


def mermaid_edges(text: str) -> set[tuple[str, str, str]]:
    """Parse ``src --> dst: trig [guards] | trig ...`` lines into (source, trigger, dest)."""
    edges = set()
    for src, dst, labels in re.findall(r"^\s*(\w+) --> (\w+): (.+)$", text, re.M):
        for label in labels.split(" | "):
            edges.add((src, label.split(" [")[0].strip(), dst))
    return edges


def test_mermaid_edges_equal_the_table() -> None:
    """Every (source, trigger, dest) of TRANSITIONS is drawn, and nothing else."""
    table = {(e.source.value, e.trigger.value, e.dest.value) for e in TRANSITIONS}
    assert mermaid_edges(diagrams.render().mermaid) == table


def test_mermaid_shows_guards() -> None:
    """Guards appear next to their trigger."""
    text = diagrams.render().mermaid
    assert "tool_result_cursor_loss [tool_results_in_flight]" in text
    assert text.startswith("---\nturnstate turn machine\n---\nstateDiagram-v2")


def test_committed_diagrams_are_current() -> None:
    """diagrams/ holds exactly what a fresh render produces."""
    assert diagrams.stale(diagrams.render(), ROOT / "diagrams") == []


def test_readme_embeds_the_mermaid_diagram() -> None:
    """README.md carries the generated Mermaid diagram in a mermaid block."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```mermaid\n(.*?)```", readme, re.S)
    assert block is not None and block.group(1) == diagrams.render().mermaid


def test_check_names_stale_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--check exits 1 naming what differs, and 0 once the files are written."""
    assert main(["diagrams", "--check", "--out", str(tmp_path)]) == 1
    assert "turn.mmd" in capsys.readouterr().out
    assert main(["diagrams", "--out", str(tmp_path)]) == 0
    (tmp_path / "turn.dot").write_text("digraph {}", encoding="utf-8")
    assert main(["diagrams", "--check", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "turn.dot" in out and "turn.mmd" not in out.split("stale")[-1]


def test_demo_json_tells_the_whole_story(tmp_path: Path) -> None:
    """The demo exits 0, prints one JSON document, and shows every required step."""
    db = tmp_path / "demo.sqlite"
    result = run_cli("demo", "--json", "--db", str(db))
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    turns = doc["turns"]
    keys = {"index", "provider", "model", "strategy", "path", "degradation", "abort",
            "toolCalls", "requestBytes", "cacheHitTokens", "context"}
    assert all(keys <= set(t) for t in turns)
    by = [(t["provider"], t["strategy"], t["degradation"], t["abort"]) for t in turns]
    assert ("openai", "cursor", None, None) in by
    assert any(t["provider"] == "openai" and t["strategy"] == "cursor" and t["toolCalls"]
               for t in turns)
    expired = next(i for i, t in enumerate(turns) if t["degradation"] == "cursor_expired")
    assert turns[expired]["path"][:3] == ["validate", "cursor", "replay"]
    assert turns[expired + 1]["strategy"] == "cursor"  # recovered
    assert any(t["degradation"] == "system_prompt_changed" for t in turns)
    assert any(t["provider"] == "anthropic" and t["degradation"] == "provider_changed"
               and t["strategy"] == "local_loop" for t in turns)
    assert any(t["provider"] == "deepseek" and t["toolCalls"] and t["cacheHitTokens"] > 0
               for t in turns)
    assert any(t["provider"] == "gemini" and t["toolCalls"] and t["abort"] is None
               for t in turns)
    assert any(t["abort"] == "tool_result_cursor_loss" for t in turns)
    assert any(t["context"] and t["context"]["severity"] in {"warning", "danger", "critical"}
               for t in turns)
    # One Anthropic compaction, and the next turn sends a small fraction of its bytes.
    compacted = next(i for i, t in enumerate(turns) if t["compacted"])
    assert turns[compacted]["provider"] == "anthropic" and doc["summary"]["compactions"] == 1
    assert turns[compacted + 1]["requestBytes"] * 20 < turns[compacted]["requestBytes"]
    assert doc["summary"]["turns"] == len(turns) and db.is_file()
    # A price on every priced turn, none on an unpriced model, and the chat's total.
    priced = [Decimal(t["costUsd"]) for t in turns if t["costUsd"] is not None]
    assert priced and all(c > 0 for c in priced)
    assert any(t["costUsd"] is None and t["model"] == "demo-small-context" for t in turns)
    assert Decimal(doc["summary"]["costUsd"]) == sum(priced)


def test_human_demo_is_plain_off_a_terminal() -> None:
    """Piped output has no escape codes and one block per turn."""
    result = run_cli("demo")
    assert result.returncode == 0 and "\033[" not in result.stdout
    assert result.stdout.count("    path     validate") == 14


def test_inspect_and_path_diagram(tmp_path: Path) -> None:
    """inspect shows the chat row, envelope and paths; --turn draws one turn's path."""
    db = tmp_path / "d.sqlite"
    doc = json.loads(run_cli("demo", "--json", "--db", str(db)).stdout)
    chat = doc["summary"]["chatId"]
    shown = run_cli("inspect", str(db), chat)
    assert shown.returncode == 0, shown.stderr
    assert f"chat {chat}" in shown.stdout and "tool_result_cursor_loss" in shown.stdout
    assert "recovered=true" in shown.stdout and "path: validate -> " in shown.stdout
    aborted = next(t for t in doc["turns"] if t["abort"])
    drawn = run_cli("diagrams", "--turn", str(db), aborted["turnId"], "--out", str(tmp_path))
    assert drawn.returncode == 0, drawn.stderr
    mermaid = (tmp_path / f"turn-{aborted['turnId']}.mmd").read_text(encoding="utf-8")
    assert "Class aborted s_active" in mermaid and "tool_result_cursor_loss" in mermaid
    assert "Class tool_iteration s_previous" in mermaid


@pytest.mark.parametrize(
    ("args", "status", "needle"),
    [
        (["bogus"], 2, "invalid choice"),
        (["demo", "--nope"], 2, "unrecognized arguments"),
        (["inspect", "/no/such.sqlite", "c"], 1, "no database at"),
        (["diagrams", "--turn", "/no/such.sqlite", "t"], 1, "no database at"),
        (["emulate", "nope"], 1, "unknown provider"),
        ([], 2, "usage"),
    ],
)
def test_errors_are_one_line_never_a_traceback(args: list[str], status: int,
                                               needle: str) -> None:
    """Usage errors exit 2, operational errors exit 1 with one line; no traceback."""
    result = run_cli(*args)
    assert result.returncode == status
    assert needle in result.stderr and "Traceback" not in result.stderr


def test_unknown_chat_and_turn_are_one_line(tmp_path: Path) -> None:
    """A database without that chat or turn gives one clear line and exit 1."""
    db = tmp_path / "d.sqlite"
    assert run_cli("demo", "--db", str(db)).returncode == 0
    for args in (["inspect", str(db), "nope"], ["diagrams", "--turn", str(db), "nope"]):
        result = run_cli(*args)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "nope" in result.stderr


def test_emulate_serves_until_interrupted() -> None:
    """emulate prints its base URL, answers HTTP, and exits 0 on SIGINT."""
    import signal
    import urllib.request

    proc = subprocess.Popen([sys.executable, "-m", "turnstate.cli", "emulate", "anthropic"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = re.search(r"(http://127\.0\.0\.1:\d+\S*)", line)
        assert url is not None, line
        request = urllib.request.Request(url.group(1) + "/messages", data=b"{}",
                                         headers={"content-type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=10)
        assert info.value.code in {400, 401}
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()


@pytest.mark.parametrize("command", [["inspect", "{db}", "c"], ["release", "{db}", "c"],
                                     ["diagrams", "--turn", "{db}", "t"],
                                     ["demo", "--db", "{db}"]])
@pytest.mark.parametrize("target", ["mysql://user:hunter2@host/db", "sqlite:chats.db",
                                    "sqlite:///chats.db"])
def test_a_url_that_is_no_store_is_refused_without_its_password(
        tmp_path: Path, command: list[str], target: str) -> None:
    """A URL that names no store turnstate opens is one line that names its scheme only:
    ``inspect`` and ``release`` printed ``no database at mysql://user:hunter2@...`` (the
    password on the operator's terminal and in CI logs), and ``demo`` created a file named
    after the URL in the working directory."""
    args = [part.replace("{db}", target) for part in command]
    result = subprocess.run([sys.executable, "-m", "turnstate.cli", *args], capture_output=True,
                            text=True, cwd=tmp_path, check=False)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "hunter2" not in result.stderr
    assert "is not a store turnstate opens" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_serve_refuses_a_url_that_is_no_store_before_creating_anything(tmp_path: Path) -> None:
    """``serve --db mysql://user:pw@...`` said ``cannot create the database file
    mysql://user:hunter2@...`` (the password), and ``--db sqlite:chats.db`` created a file
    named ``sqlite:chats.db`` before the store refused it; both created the token file
    first. Now a usage error (exit 2) before anything exists."""
    for target in ("mysql://user:hunter2@host/db", "sqlite:chats.db"):
        result = subprocess.run([sys.executable, "-m", "turnstate.cli", "serve", "--db", target,
                                 "--port", "0"], capture_output=True, text=True, cwd=tmp_path,
                                check=False, timeout=60)
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr and "hunter2" not in result.stderr
        assert "is not a store turnstate opens" in result.stderr
        assert list(tmp_path.iterdir()) == []
