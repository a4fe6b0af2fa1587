"""Check what ``python -m build`` made: ``python .ci/check_dist.py DIST_DIR``.

The wheel must carry the package with its page (``server/static``), ``py.typed`` and the
license, and no tests; the sdist must carry the package, README, LICENSE and docs, and
no tests, benchmarks or CI scripts. Prints one line per problem and exits 1 on any.
"""

from __future__ import annotations

import sys
import tarfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

WHEEL_NEEDS = ("turnstate/__init__.py", "turnstate/py.typed",
               "turnstate/server/static/index.html", "turnstate/server/static/app.js",
               "turnstate/server/static/style.css", "turnstate/emulators/__init__.py",
               "turnstate/server/static/vendor/marked.esm.js",
               "turnstate/server/static/vendor/purify.es.js",
               "turnstate/server/static/vendor/LICENSE.dompurify")
SDIST_NEEDS = ("README.md", "LICENSE", "pyproject.toml", "docs/api.md",
               "turnstate/__init__.py", "turnstate/server/static/index.html")
NEVER = ("tests/", "benchmarks/", ".ci/", "conftest.py")


def _stray(names: Iterable[str]) -> list[str]:
    return sorted(n for n in names if any(n.startswith(p) or f"/{p}" in n for p in NEVER)
                  or Path(n).name.startswith("test_"))


def wheel_problems(names: Iterable[str]) -> list[str]:
    """What is wrong with a wheel holding ``names``."""
    names = set(names)
    problems = [f"wheel lacks {need}" for need in WHEEL_NEEDS if need not in names]
    if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
        problems.append("wheel lacks its LICENSE")
    return problems + [f"wheel carries {n}" for n in _stray(names)]


def sdist_problems(names: Iterable[str]) -> list[str]:
    """What is wrong with an sdist holding ``names`` (its top folder stripped)."""
    inner = {n.partition("/")[2] for n in names}
    problems = [f"sdist lacks {need}" for need in SDIST_NEEDS if need not in inner]
    return problems + [f"sdist carries {n}" for n in _stray(inner)]


def check(dist: Path) -> list[str]:
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        return [f"expected one wheel and one sdist in {dist}, found {wheels + sdists}"]
    with zipfile.ZipFile(wheels[0]) as wheel, tarfile.open(sdists[0]) as sdist:
        return wheel_problems(wheel.namelist()) + sdist_problems(sdist.getnames())


def main(argv: list[str]) -> int:
    problems = check(Path(argv[1] if len(argv) > 1 else "dist"))
    for problem in problems:
        print(problem, file=sys.stderr)
    print("dist: ok" if not problems else f"dist: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
