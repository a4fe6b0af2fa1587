"""turnstate: continue multi-turn LLM conversations across providers.

Importing the package loads its parts in dependency order (engine primitives, states,
storage, providers, then the driver), so any subpackage can be imported first.
"""

import logging

from turnstate import engine as engine

# A library never prints on its own: the application decides where "turnstate" logs go.
logging.getLogger("turnstate").addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = ["__version__", "engine"]
