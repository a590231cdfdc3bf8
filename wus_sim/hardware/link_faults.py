"""Failed and slow ICI cables: naming cables, parsing fault lists, applying them to a slice."""

import math
import re

import numpy as np

from ..inputs.errors import ConfigError
from ..inputs.limits import MAX_SLOW_FACTOR

__all__ = ["parse_cables", "split_cables", "split_slow_links", "cable_names", "with_link_faults"]


# ============================================================ failed and slow links
_CABLE_RE = re.compile(r"^([0-9]{1,12})([+-])([xyz])$")

MAX_RANDOM_CABLES = 1_000_000
"""Largest K of ``failed_links: K`` / ``slow_links: K:FACTOR`` (a slice has fewer cables anyway)."""


def cable_names(topology, link_ids):
    """Names (``12+x``) of the cables of *link_ids*, one per cable, by ``+`` link id."""
    plus = sorted({int(l) if topology.link_direction[l] > 0 else topology.reverse_link(l) for l in link_ids})
    return [f"{int(topology.link_src[l])}+{'xyz'[int(topology.link_axis[l])]}" for l in plus]


def split_cables(text, *, key_path="failed_links"):
    """``[(chip, direction, axis), ...]`` of a cable list (comma-separated ``CHIP+AXIS`` or
    ``CHIP-AXIS``), the spelling only (no slice needed). ConfigError naming *key_path*."""
    out = []
    for item in str(text).split(","):
        m = _CABLE_RE.match(item.strip())
        if not m:
            raise ConfigError("must be comma-separated cables CHIP+AXIS or CHIP-AXIS (e.g. 12+x,40-y; "
                              "chip ids row-major, axis 0 fastest), or a count K", key_path=key_path,
                              value=item.strip())
        out.append((int(m.group(1)), 1 if m.group(2) == "+" else -1, "xyz".index(m.group(3))))
    return out


def parse_cables(topology, text, *, key_path="failed_links"):
    """Link ids (``+`` direction) of the cables *text* names: comma-separated ``CHIP+AXIS`` or
    ``CHIP-AXIS`` (``12+x``: the cable from chip 12 to its ``+x`` neighbour; ``13-x`` the one
    to its ``-x`` neighbour). ConfigError naming *key_path* on anything else."""
    out = []
    for chip, direction, axis in split_cables(text, key_path=key_path):
        item = f"{chip}{'+' if direction > 0 else '-'}{'xyz'[axis]}"
        if chip >= topology.num_chips or axis >= topology.ndim:
            raise ConfigError(f"names no chip and axis of this {topology.shape_str} slice (chips 0.."
                              f"{topology.num_chips - 1}, axes {'xyz'[:topology.ndim]})", key_path=key_path,
                              value=item)
        link = int(topology.link_id(chip, axis, direction))
        if not topology.link_exists[link]:
            raise ConfigError("names no cable: a mesh edge has no link that way", key_path=key_path, value=item)
        out.append(link if direction > 0 else topology.reverse_link(link))
    return out


def _cable_spec(topology, spec, rng, exclude, key_path):
    """Cables of a spec: an int K (K distinct cables drawn by *rng* among those not in
    *exclude*) or a LIST string."""
    if isinstance(spec, str) and spec.strip().isdigit():
        spec = int(spec.strip())
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        pool = np.setdiff1d(topology.cables, np.asarray(sorted(exclude), dtype=np.int64))
        if not 0 <= spec <= len(pool):
            raise ConfigError(f"must be a count from 0 to {len(pool)} (the cables of this {topology.shape_str} "
                              "slice that are left to choose from)", key_path=key_path, value=spec)
        return [int(l) for l in np.sort(rng.choice(pool, size=int(spec), replace=False))]
    if not isinstance(spec, str):
        raise ConfigError("must be a count K or comma-separated cables such as 12+x,40-y", key_path=key_path,
                          value=spec)
    return parse_cables(topology, spec, key_path=key_path)


def split_slow_links(text):
    """``(cables, factor)`` of a ``LIST:FACTOR`` or ``K:FACTOR`` string (ConfigError otherwise)."""
    head, sep, tail = str(text).rpartition(":")
    try:
        factor = float(tail)
    except ValueError:
        factor = math.nan
    if not sep or not head.strip() or not 1 <= factor <= MAX_SLOW_FACTOR:
        raise ConfigError("must be LIST:FACTOR or K:FACTOR (e.g. 12+x,40-y:4 or 3:2), FACTOR >= 1 "
                          f"and <= {MAX_SLOW_FACTOR:g} dividing the cables' bandwidth", key_path="slow_links", value=text)
    return head.strip(), factor


def with_link_faults(topology, failed_links=None, slow_links=None, seed=None):
    """*topology* with failed and slowed cables (``None``: none).

    *failed_links*: a count K (K distinct cables chosen at random) or a LIST string
    (``"12+x,40-y"``, see :func:`parse_cables`). *slow_links*: ``"LIST:FACTOR"`` or
    ``"K:FACTOR"``: both directions of those cables run at their bandwidth / FACTOR
    (FACTOR >= 1). Random cables come from ``numpy.random.default_rng(seed)`` (*seed*
    ``None`` = 0): the failed ones first, then the slow ones among the cables left.
    """
    if failed_links is None and slow_links is None:
        return topology
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise ConfigError("must be a whole number >= 0", key_path="seed", value=seed)
    rng = np.random.default_rng(0 if seed is None else int(seed))
    failed = []
    if failed_links is not None:
        failed = _cable_spec(topology, failed_links, rng, (), "failed_links")
        if failed:
            topology = topology.with_failed_links(failed)
    if slow_links is not None:
        head, factor = split_slow_links(slow_links)
        slow = _cable_spec(topology, head, rng, failed, "slow_links")
        both = [l for c in slow for l in (c, topology.reverse_link(c)) if l not in topology.failed_links]
        bw = topology.link_Bps
        for link in both:  # each at its own bandwidth / factor (axes may differ)
            topology = topology.with_link_bandwidth(link, float(bw[link]) / factor)
    return topology
