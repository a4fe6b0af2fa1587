"""Two CPU profiles of the same turns taken two ways, and where the second spends more.

``bench_server.py --profile FILE`` profiles the direct and the served batches of part 1
(``time.process_time``, so waiting is not counted) and prints, per function, the extra
own CPU time per turn the served turns spent: what the server adds, by function.
"""

from __future__ import annotations

import cProfile
import pstats
from pathlib import Path

Key = tuple[str, int, str]


def _own(profile: cProfile.Profile) -> dict[Key, tuple[float, int]]:
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    return {key: (value[2], value[1]) for key, value in stats.items()}


def _name(key: Key) -> str:
    path = key[0].split("site-packages/")[-1]
    path = path.split("/turnstate/", 1)[-1] if "/turnstate/" in path else path
    return f"{path}:{key[1]}({key[2]})"


def print_extra(direct: cProfile.Profile, served: cProfile.Profile, turns: int,
                top: int = 25) -> None:
    """The ``top`` functions by extra own CPU per turn, served minus direct."""
    before, after = _own(direct), _own(served)
    rows = []
    for key in before.keys() | after.keys():
        own_a, calls_a = before.get(key, (0.0, 0))
        own_b, calls_b = after.get(key, (0.0, 0))
        rows.append(((own_b - own_a) / turns * 1e6, (calls_b - calls_a) / turns, key))
    rows.sort(reverse=True)
    total = sum(row[0] for row in rows)
    print(f"-- profiled: served - direct own CPU per turn, {total:.0f} us in all (profiled, "
          "so inflated); the top functions:")
    print(f"{'us/turn':>9} {'calls':>6}  function")
    for extra, calls, key in rows[:top]:
        print(f"{extra:>9.1f} {calls:>6.1f}  {_name(key)}")


def dump(direct: cProfile.Profile, served: cProfile.Profile, path: Path) -> None:
    """``path`` gets the served profile, ``<stem>.direct<suffix>`` the direct one."""
    served.dump_stats(path)
    direct.dump_stats(path.with_name(f"{path.stem}.direct{path.suffix}"))


