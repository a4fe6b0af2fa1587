"""The SQLite store's statements bind by position with plain ``?`` placeholders only.

Python 3.12's ``sqlite3`` counts a numbered placeholder (``?1``) as a named one and warns
when a sequence is bound to it (CPython gh-101693, gh-117995); 3.14 refuses named
placeholders with a sequence. The store binds tuples everywhere, so a numbered
placeholder in any of its statements is a latent failure on newer Pythons.
"""

from __future__ import annotations

import re
from pathlib import Path

from turnstate import storage

NUMBERED = re.compile(r"\?\d")


def test_no_sqlite_statement_uses_a_numbered_placeholder() -> None:
    sources = sorted(Path(storage.__file__).parent.glob("_sqlite*.py"))
    assert sources, "the SQLite store's modules were not found"
    found = [f"{path.name}:{number}: {line.strip()}"
             for path in sources
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if NUMBERED.search(line)]
    assert found == []
