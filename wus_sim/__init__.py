"""wus-sim: discrete-event simulation of replicated vs sharded weight update on TPU pods.

Public names are curated here; importing the package does no work and pulls in
no heavy dependency (SimPy, pandas, matplotlib load only where used).
"""

from .errors import ConfigError, InfeasibleError, UnknownNameError, WusError
from .topology import Topology, load_topology, known_topologies

__version__ = "0.1.0"

__all__ = [
    "WusError", "ConfigError", "InfeasibleError", "UnknownNameError",
    "Topology", "load_topology", "known_topologies",
]
