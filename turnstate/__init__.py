"""turnstate: continue multi-turn LLM conversations across providers.

Importing the package loads its parts in dependency order (engine primitives, states,
storage, providers, then the driver), so any subpackage can be imported first.
"""

from turnstate import engine as engine

__version__ = "0.1.0"

__all__ = ["__version__", "engine"]
