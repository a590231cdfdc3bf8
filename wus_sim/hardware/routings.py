"""The routing modes of the timing model (:mod:`wus_sim.hardware.network` says what each does),
in a module of their own that imports nothing: ``wus-sim collective`` reads the default before
numpy is loaded (:mod:`wus_sim.cli.collective_lean`)."""

__all__ = ["ROUTINGS", "DEFAULT_ROUTING"]

ROUTINGS = ("store-and-forward", "cut-through")
"""Routing modes of the timing model (see :mod:`wus_sim.hardware.network`)."""

DEFAULT_ROUTING = "cut-through"
"""The routing of every command, step and experiment point unless one says otherwise (the
engines' own functions and :class:`wus_sim.hardware.network.Network` take store-and-forward, their
reference mode, unless told). Cut-through: a link moves packets, so a chip forwards a message's head while its tail is
still arriving; the whole-message store-and-forward of the first releases doubled every
two-hop edge of a mesh's folded rings, and Google's MLPerf v0.6 Transformer runs on the
v3-128 to v3-512 meshes ran faster than that allows (docs/validation.md)."""
