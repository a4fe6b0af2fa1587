"""What a fresh clone packages: the license, the SPDX expression, one version, the lazy
``PostgresStore`` export, and the checker ``.ci/run`` applies to the built sdist and wheel."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import turnstate
from turnstate.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_dist", ROOT / ".ci" / "check_dist.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GOOD_WHEEL = [
    "turnstate/__init__.py", "turnstate/py.typed", "turnstate/server/static/index.html",
    "turnstate/server/static/app.js", "turnstate/server/static/style.css",
    "turnstate/emulators/__init__.py", "turnstate-0.1.0.dist-info/licenses/LICENSE",
    "turnstate/server/static/vendor/marked.esm.js",
    "turnstate/server/static/vendor/purify.es.js",
    "turnstate/server/static/vendor/LICENSE.dompurify",
]
GOOD_SDIST = [f"turnstate-0.1.0/{n}" for n in (
    "README.md", "LICENSE", "pyproject.toml", "docs/api.md", "turnstate/__init__.py",
    "turnstate/server/static/index.html")]


def test_the_license_is_the_apache_2_text_and_pyproject_names_it_in_spdx() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]


def test_the_sdist_manifest_prunes_tests_and_keeps_docs() -> None:
    lines = (ROOT / "MANIFEST.in").read_text().splitlines()
    assert {"prune tests", "prune benchmarks", "graft docs", "graft turnstate"} <= set(lines)
    assert "include README.md LICENSE pyproject.toml" in lines


def test_version_prints_the_package_version(capsys: object) -> None:
    result = subprocess.run([sys.executable, "-m", "turnstate.cli", "--version"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0
    assert result.stdout.strip() == f"turnstate {turnstate.__version__}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "turnstate.__version__"}
    assert main is not None


def test_postgres_store_is_exported_from_the_root_lazily() -> None:
    from turnstate import PostgresStore
    from turnstate.storage._postgres import PostgresStore as Real

    assert PostgresStore is Real and "PostgresStore" in turnstate.__all__


def test_without_asyncpg_the_root_imports_and_postgres_store_says_what_is_missing() -> None:
    code = ("import sys; sys.modules['asyncpg'] = None\n"
            "import turnstate\n"
            "assert 'turnstate.storage._postgres' not in sys.modules\n"
            "from turnstate import PostgresStore\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last == ("ModuleNotFoundError: PostgresStore needs asyncpg, the postgres extra: "
                    "pip install 'turnstate[postgres]'")


def test_an_unknown_root_attribute_is_an_attribute_error() -> None:
    try:
        turnstate.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("no AttributeError")


def test_the_dist_check_passes_a_good_build_and_names_what_is_wrong() -> None:
    check = _checker()
    assert check.wheel_problems(GOOD_WHEEL) == []
    assert check.sdist_problems(GOOD_SDIST) == []
    bad_wheel = [n for n in GOOD_WHEEL if "static/app.js" not in n] + [
        "tests/test_layers.py", "turnstate/conftest.py"]
    assert check.wheel_problems(bad_wheel) == [
        "wheel lacks turnstate/server/static/app.js", "wheel carries tests/test_layers.py",
        "wheel carries turnstate/conftest.py"]
    bad_sdist = [n for n in GOOD_SDIST if not n.endswith("LICENSE")] + [
        "turnstate-0.1.0/tests/storage/test_memory.py"]
    assert check.sdist_problems(bad_sdist) == [
        "sdist lacks LICENSE", "sdist carries tests/storage/test_memory.py"]
