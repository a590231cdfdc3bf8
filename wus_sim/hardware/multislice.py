"""Multislice: N identical TPU slices joined by the data-center network (DCN).

A :class:`Multislice` is a pure object (no SimPy), like :class:`~wus_sim.hardware.topology.Topology`:
``slices`` copies of one slice, each keeping its own ICI torus, and a DCN between them
with a bandwidth per chip and a latency. Cloud TPU Multislice works so: "TPU chips in
each slice communicate through inter-chip-interconnect (ICI). TPU chips in different slices
communicate by transferring data to CPUs (hosts) which in turn transmit the data over the
data-center network (DCN)" (Cloud TPU docs, "Cloud TPU Multislice overview").

Data parallelism runs over every replica of every slice: replicas = slices x replicas per
slice; global batch = replicas x per-replica batch.

Hierarchical collectives
------------------------
A collective over all replicas runs in three phases (:func:`hierarchical_phases`), each a
collective of its own: within each slice over ICI (the slice's collective engine), across
slices over the DCN on the reduced shard, then back within the slice. With ``S`` the full
buffer per replica (the collectives' size convention), ``C`` chips per slice and ``M``
slices, after an in-slice reduce-scatter every chip holds ``c = S / C`` bytes (its cores'
shards), and only those cross the DCN:

* all-reduce = ICI reduce-scatter(S) + DCN all-reduce(c) + ICI all-gather(S);
* reduce-scatter, sharded across slices = ICI reduce-scatter(S) + DCN reduce-scatter(c)
  (each replica ends with 1/(M N) of the gradient); sharded within a slice only = ICI
  reduce-scatter(S) + DCN all-reduce(c) (each replica ends with 1/N, the same in every slice);
* all-gather, across slices = DCN all-gather(c) + ICI all-gather(S); within = ICI all-gather(S).

The DCN part is a closed form (:func:`dcn_time_s`). Why a direct exchange, not a ring: each
chip talks with its M-1 peers (same position in the other slices) at once, so a DCN
reduce-scatter or all-gather is one exchange, ``alpha + (M-1)/M * c / B``, and an
all-reduce two (reduce-scatter then all-gather). A ring over the M slices moves the same
bytes over the same per-chip bandwidth but pays ``alpha`` M-1 times per phase; the two are
equal for M = 2, the case the shipped experiment studies. The bottleneck assumed is each
chip's share of its host's network interface (``B`` = ``dcn_GBps`` per chip, one
direction); the data-center fabric behind it is assumed not oversubscribed.

The step runs a hierarchical collective as one collective on its timeline (it holds the
replica's network for all three phases): one bucket's DCN phase does not run beside
another bucket's ICI phase. That is conservative for both strategies alike.

Update sharding across slices
-----------------------------
``shard_across_slices`` (a step option) chooses where the sharded update's shards live.
True (the default, Xu et al. 2020's scheme over every replica): each replica updates
1/(M N) of the weights and keeps 1/(M N) of the slots; the DCN carries the gradient
reduce-scatter and the weight all-gather, and the all-gather overlaps the next forward.
False (replicate across slices, shard within: what hybrid-sharded data parallelism does):
each replica updates 1/N, every slice redundantly; the DCN all-reduce sits on the gradient
path. Both move the same DCN bytes per step.

Defaults
--------
Each chip's ``dcn_GBps`` in chips.yaml gives its DCN bandwidth per chip, with its source: Cloud
TPU publishes figures for v5e, v5p and v6e; v2-v4's are declared assumptions. A chip without one
(a user chip, the inline topologies' ``generic``) takes :data:`GENERIC_DCN_GBPS`, an assumption
that ``step`` and ``describe topology`` print with the multislice. The
DCN latency has no published figure: :data:`DEFAULT_DCN_LATENCY_US` is an assumption. Both
are parameters (``--dcn-GBps``, ``--dcn-latency-us``, point keys ``dcn_GBps``,
``dcn_latency_us``, and a topology file's ``multislice`` section).
"""

from dataclasses import dataclass, field
import math
import os
from pathlib import Path

from ..inputs.config import Section, load_yaml, present
from ..inputs.errors import ConfigError
from ..inputs.memo import IdentityMemo, fixed_while_running
from ..inputs.limits import MAX_CHIPS, MAX_REPLICAS, RATE_RANGES, check_limit
from .topology import Topology
from .topology_files import load_topology, topology_dirs
from ..inputs.units import GB, US

__all__ = ["Multislice", "GENERIC_DCN_GBPS", "DEFAULT_DCN_LATENCY_US", "MAX_SLICES", "load_multislice",
           "dcn_phase_time_s", "dcn_time_s", "hierarchical_phases", "hierarchical_time",
           "planning_topology"]

MAX_SLICES = 1024
"""Most slices in one multislice (Cloud TPU documents jobs of tens of thousands of chips; a
v5e-256 pod x 1024 is 262,144 chips, over :data:`~wus_sim.inputs.limits.MAX_CHIPS` anyway)."""

GENERIC_DCN_GBPS = 6.25
"""DCN bandwidth per chip of a chip whose chips.yaml entry has no ``dcn_GBps`` (inline topologies'
``generic`` chip, user chips): assumption, the JAX scaling book's 2.5e10 B/s per host over 4 chips."""

DEFAULT_DCN_LATENCY_US = 10.0
"""One-way latency of one DCN exchange, us. Assumption: Cloud TPU publishes no figure; a
data-center network's one-way latency through host and NIC is some microseconds to tens of
microseconds. It matters only for small collectives (the optimizer's norms); vary it."""


@dataclass(frozen=True, eq=False)
class Multislice:
    """``slices`` identical slices of *slice* joined by the data-center network."""

    slice: Topology
    """One slice, with its ICI torus (every slice is this one)."""
    slices: int
    """Number of slices ``M`` (>= 2; one slice is not a multislice)."""
    dcn_Bps: float
    """DCN bandwidth of one chip, one direction, bytes/s."""
    dcn_latency_s: float
    """Latency of one DCN exchange, seconds."""
    name: str = ""
    """Name (the topology file's, or ``'<M>x <slice>'``)."""
    sources: dict = field(default_factory=dict)
    """Where ``dcn_GBps`` and ``dcn_latency_us`` came from (key -> citation)."""

    def __post_init__(self):
        if isinstance(self.slices, bool) or not isinstance(self.slices, int) or not 2 <= self.slices <= MAX_SLICES:
            raise ConfigError(f"must be a whole number in 2..{MAX_SLICES} for a multislice", key_path="slices",
                              value=self.slices)
        low, high = RATE_RANGES["dcn_GBps"][:2]
        if not low * GB <= self.dcn_Bps <= high * GB:
            raise ConfigError(f"must be >= {low:g} and <= {high:g}", key_path="dcn_GBps", value=self.dcn_Bps / GB)
        if not 0 <= self.dcn_latency_s < math.inf:
            raise ConfigError("must be >= 0 and finite", key_path="dcn_latency_us", value=self.dcn_latency_s / US)
        check_limit("chips over all slices", self.slices * self.slice.num_chips, MAX_CHIPS, key_path="slices",
                    hint="use fewer slices")
        check_limit("replicas over all slices", self.slices * self.slice.num_replicas, MAX_REPLICAS,
                    key_path="slices", hint="use fewer slices")
        if not self.name:
            object.__setattr__(self, "name", f"{self.slices}x {self.slice.name}")

    @property
    def chips_per_slice(self):
        return self.slice.num_chips

    @property
    def num_chips(self):
        return self.slices * self.slice.num_chips

    @property
    def num_replicas(self):
        """Cores over all slices (one replica per core)."""
        return self.slices * self.slice.num_replicas

    def to_dict(self):
        """The multislice's own figures, units in the keys."""
        return {"name": self.name, "slice": self.slice.name, "slices": self.slices,
                "dcn_GBps": self.dcn_Bps / GB, "dcn_latency_us": self.dcn_latency_s / US,
                "chips": self.num_chips, "cores": self.num_replicas, "sources": dict(self.sources)}

    def __repr__(self):
        return (f"<Multislice {self.name}: {self.slices} x {self.slice.shape_str}, DCN "
                f"{self.dcn_Bps / GB:g} GB/s per chip, {self.dcn_latency_s / US:g} us>")


# ====================================================================== costs
def dcn_phase_time_s(ms, chip_nbytes):
    """One DCN reduce-scatter or all-gather among the M slices of *chip_nbytes* per chip:
    a direct exchange, ``alpha + (M-1)/M * c / B`` (each chip sends its M-1 peers 1/M each,
    at once, over its own DCN share)."""
    if chip_nbytes <= 0:
        return 0.0
    m = ms.slices
    return ms.dcn_latency_s + (m - 1) / m * chip_nbytes / ms.dcn_Bps


def dcn_time_s(ms, op, nbytes):
    """DCN time of the cross-slice part of a collective whose full per-replica buffer is
    *nbytes*: every chip carries ``nbytes / chips_per_slice`` (its cores' reduced shards).
    ``op`` is the DCN collective: ``'all-reduce'`` (two exchanges), ``'reduce-scatter'`` or
    ``'all-gather'`` (one)."""
    c = nbytes / ms.chips_per_slice
    phases = {"all-reduce": 2, "reduce-scatter": 1, "all-gather": 1}
    if op not in phases:
        raise ConfigError("must be all-reduce, reduce-scatter or all-gather", key_path="op", value=op)
    return phases[op] * dcn_phase_time_s(ms, c)


def hierarchical_phases(op, nbytes, *, shard_across_slices=True):
    """The phases of collective *op* over every replica of a multislice, as
    ``(network, op, nbytes)`` with ``network`` ``'ici'`` (within each slice, full buffer
    convention) or ``'dcn'`` (across slices, on the reduced shard; *nbytes* is still the full
    per-replica buffer, see :func:`dcn_time_s`). See the module docstring."""
    if op == "all-reduce":
        return (("ici", "reduce-scatter", nbytes), ("dcn", "all-reduce", nbytes), ("ici", "all-gather", nbytes))
    if op == "reduce-scatter":
        cross = "reduce-scatter" if shard_across_slices else "all-reduce"
        return (("ici", "reduce-scatter", nbytes), ("dcn", cross, nbytes))
    if op == "all-gather":
        if shard_across_slices:
            return (("dcn", "all-gather", nbytes), ("ici", "all-gather", nbytes))
        return (("ici", "all-gather", nbytes),)
    raise ConfigError("must be all-reduce, reduce-scatter or all-gather", key_path="op", value=op)


def hierarchical_time(ms, op, nbytes, ici_time, *, shard_across_slices=True):
    """Seconds of collective *op* (full buffer *nbytes* per replica) over every replica of
    multislice *ms*: the sum of its phases (they run one after the other). *ici_time(op,
    nbytes)* times an in-slice phase (the step passes the slice's collective engine)."""
    if nbytes <= 0:
        return 0.0
    total = 0.0
    for network, phase_op, n in hierarchical_phases(op, nbytes, shard_across_slices=shard_across_slices):
        total += ici_time(phase_op, n) if network == "ici" else dcn_time_s(ms, phase_op, n)
    return total


def planning_topology(ms):
    """The grid the sharding planner cuts shards over when the update is sharded across
    slices: the slice's chips with the slices stacked along one more axis (no wraparound),
    so shard ownership runs core, the slice's axes, then slice, the order the hierarchical
    reduce-scatter leaves shards in. A 3-D slice has no axis to spare: its chips are laid
    out flat, one line per slice (shard sizes do not depend on the layout, only ownership
    order does). Its ICI figures are the slice's; nothing is simulated on it."""
    s = ms.slice
    if s.ndim < 3:
        dims, wrap = s.dims + (ms.slices,), s.wrap + (False,)
        link = s.axis_link_Bps + (ms.dcn_Bps,)
    else:
        dims, wrap, link = (s.num_chips * ms.slices,), (False,), (min(s.axis_link_Bps),)
    return Topology(name=ms.name, chip=s.chip, dims=dims, wrap=wrap, axis_link_Bps=link,
                    hop_latency_s=s.hop_latency_s, onchip_Bps=s.onchip_Bps, cores_per_chip=s.cores_per_chip,
                    description=f"planning grid of {ms.name}")


# ==================================================================== loading
def _topology_file(spec):
    """Path of the topology file *spec* names (a path or a name on the topology path), or None."""
    if not isinstance(spec, (str, os.PathLike)):
        return None
    text = str(spec)
    if text.startswith(("torus:", "mesh:")):
        return None
    if text.endswith((".yaml", ".yml")) or os.sep in text:
        return Path(text) if present(text) else None
    for d in topology_dirs():
        p = d / f"{text}.yaml"
        if present(p):
            return p
    return None


def _file_section(path):
    """The checked ``multislice`` section of a topology file, as ``{key: value}`` in file
    units, with the file's sources of its figures; ``{}`` when it has none (read again only
    when the file changes: every point of a sweep asks)."""
    try:
        st = os.stat(path)
    except OSError:
        return _read_file_section(path)
    section, cited = _SECTIONS.get((), (str(path), st.st_mtime_ns, st.st_size), lambda: _read_file_section(path))
    return dict(section), dict(cited)


_SECTIONS = IdentityMemo(maxsize=64)


def _read_file_section(path):
    doc = Section(load_yaml(path), file=path)
    if "multislice" not in doc:
        return {}, {}
    sec = doc.section("multislice")
    sec.check_keys(required={"slices"}, optional={"dcn_GBps", "dcn_latency_us"})
    out = {"slices": sec.integer("slices", minimum=1, maximum=MAX_SLICES)}
    if "dcn_GBps" in sec:
        out["dcn_GBps"] = sec.number("dcn_GBps", minimum=RATE_RANGES["dcn_GBps"][0], maximum=RATE_RANGES["dcn_GBps"][1])
    if "dcn_latency_us" in sec:
        out["dcn_latency_us"] = sec.number("dcn_latency_us", minimum=0, maximum=1e6)
    sources = doc.get("sources") or {}
    cited = {k: str(sources[k]) for k in ("dcn_GBps", "dcn_latency_us") if isinstance(sources, dict) and k in sources}
    return out, cited


@fixed_while_running
def load_multislice(spec, *, slices=None, dcn_GBps=None, dcn_latency_us=None, **topology_overrides):
    """``(slice, multislice)``: the slice :class:`~wus_sim.hardware.topology.Topology` of *spec* and
    the :class:`Multislice` it is part of, or ``None`` for a single slice.

    *spec* is what :func:`~wus_sim.hardware.topology.load_topology` takes (a name, path, inline spec
    or Topology; *topology_overrides* are its keyword overrides), or a :class:`Multislice`.
    The keyword values (``None`` = not given) override the topology file's ``multislice``
    section, which overrides the chip's defaults (its ``dcn_GBps``, else :data:`GENERIC_DCN_GBPS`;
    :data:`DEFAULT_DCN_LATENCY_US`). One slice (``slices`` 1, or no section and no
    ``slices``) is no multislice: the DCN values are then unused.
    """
    for key, value, lo, positive in (("dcn_GBps", dcn_GBps, None, True), ("dcn_latency_us", dcn_latency_us, 0, False)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or (positive and not value > 0)
                                  or (lo is not None and value < lo) or value > 1e6):
            rule = "must be a number > 0 and <= 1e6" if positive else "must be a number >= 0 and <= 1e6"
            raise ConfigError(rule, key_path=key, value=value)
    if slices is not None and (isinstance(slices, bool) or not isinstance(slices, int)
                               or not 1 <= slices <= MAX_SLICES):
        raise ConfigError(f"must be a whole number in 1..{MAX_SLICES}", key_path="slices", value=slices)
    if isinstance(spec, Multislice):
        base, topology = spec, spec.slice
        if topology_overrides:
            topology = load_topology(topology, **topology_overrides)
        section = {"slices": spec.slices, "dcn_GBps": spec.dcn_Bps / GB, "dcn_latency_us": spec.dcn_latency_s / US}
        cited, name = dict(spec.sources), spec.name
    else:
        topology = load_topology(spec, **topology_overrides)
        path = _topology_file(spec)
        section, cited = _file_section(path) if path is not None else ({}, {})
        base, name = None, (topology.name if section else "")
    m = slices if slices is not None else section.get("slices", 1)
    if m == 1:
        return topology, None
    chip = topology.chip
    if chip.dcn_Bps is not None:
        chip_gbps = chip.dcn_Bps / GB
        chip_source = chip.sources.get("dcn_GBps", f"chips.yaml, chip {chip.name} (no source given)")
    else:
        chip_gbps, chip_source = GENERIC_DCN_GBPS, (
            f"assumption: chip {chip.name} has no dcn_GBps in chips.yaml; the JAX scaling book's 2.5e10 B/s "
            "per host over 4 chips")
    sources = {"dcn_GBps": chip_source,
               "dcn_latency_us": "assumption: no published Cloud TPU DCN latency (see wus_sim.hardware.multislice)"}
    sources.update(cited)
    gbps = section.get("dcn_GBps", chip_gbps)
    lat = section.get("dcn_latency_us", DEFAULT_DCN_LATENCY_US)
    if dcn_GBps is not None:
        gbps, sources["dcn_GBps"] = float(dcn_GBps), "set for this run"
    if dcn_latency_us is not None:
        lat, sources["dcn_latency_us"] = float(dcn_latency_us), "set for this run"
    if base is not None and slices is None and dcn_GBps is None and dcn_latency_us is None and not topology_overrides:
        return topology, base
    if slices is not None and slices != section.get("slices"):
        name = ""  # not the named multislice any more
    return topology, Multislice(slice=topology, slices=m, dcn_Bps=gbps * GB, dcn_latency_s=lat * US,
                                name=name, sources=sources)
