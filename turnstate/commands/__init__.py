"""The command-line commands, one module each.

Every command module exposes ``add_parser(subparsers)`` and ``run(args) -> int`` and imports
nothing from ``turnstate.cli``: the CLI parses and dispatches, the commands do the work, and
``CliError`` lives in ``_common`` where both reach it.
"""

from turnstate.commands._common import CliError

__all__ = ["CliError"]
