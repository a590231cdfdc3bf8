"""What a plan is made of: :class:`Pass` (one ring operation or pairwise exchange, run by every
ring of a level at once) and :class:`CollectivePlan` (the passes of one collective), with the
step arithmetic of the all-to-all's passes (blocks counted in units of ``S/n``, one member's
block for one peer).

The planners build them: :mod:`.plan` (reduce-scatter, all-gather, all-reduce; its docstring
gives the schedule's rules) and :mod:`.alltoall`.
"""

from dataclasses import dataclass

import numpy as np

from .embedding import RingEmbedding
from .groups import Group

__all__ = ["Pass", "CollectivePlan", "exchange_members", "a2a_steps", "a2a_dst", "a2a_step_blocks",
           "bruck_blocks"]


@dataclass(frozen=True, eq=False)
class Pass:
    """One ring operation (or pairwise exchange) run by every ring of a level at once."""

    level: str
    """``"core"`` (on-chip rings, replica members), ``"chip"`` (chip members) or ``"flat"`` (replicas)."""
    kind: str
    """``"rs"``, ``"ag"``, ``"ar"`` or ``"a2a"`` (all-to-all)."""
    pattern: str
    """``"ring"``, ``"hd"`` (halving-doubling), ``"rd"`` (recursive-doubling, kind ``"ar"``), or for
    kind ``"a2a"`` ``"pw"`` (pairwise) or ``"bruck"`` (see :mod:`.alltoall`)."""
    rings: tuple
    """One :class:`RingEmbedding` per direction (``hd``/``rd``: one, its members are the groups in rank order)."""
    fraction: float
    """Buffer per member of one direction's ring, as a fraction of ``S``."""
    half: int = 0
    """Index of the buffer half this pass belongs to (2d-split), 0 otherwise."""
    data_level: int = 0
    """Which split of the half's buffer this pass performs (its axis position in RS order)."""
    stream: object = None
    """Passes with equal ``stream`` reuse the same ring edges one after the other (RS, then AG)."""
    axis: int = None
    """Topology axis of a line-ring pass (``None`` otherwise)."""

    @property
    def size(self):
        """Members per ring (``n``)."""
        return self.rings[0].size

    @property
    def steps(self):
        """Algorithm steps ``N`` of this pass."""
        n = self.size
        if n <= 1:
            return 0
        if self.kind == "a2a":
            return a2a_steps(self.pattern, n)
        per = n - 1 if self.pattern == "ring" else int(np.log2(n))
        return 2 * per if self._rs_then_ag else per

    @property
    def _rs_then_ag(self):
        """An all-reduce ring or halving-doubling pass is a reduce-scatter then an all-gather
        (half its steps each); recursive-doubling all-reduces in one sweep."""
        return self.kind == "ar" and self.pattern != "rd"

    @property
    def rs_steps(self):
        """Steps at whose arrival the receiver sums (reduce-scatter steps; every rd step)."""
        if self.kind in ("ag", "a2a"):
            return 0
        return self.steps // 2 if self._rs_then_ag else self.steps

    def step_fraction(self, k):
        """Bytes of one step-*k* message as a fraction of ``S`` (before splitting into pieces)."""
        n = self.size
        if self.kind == "a2a":
            return self.fraction * a2a_step_blocks(self.pattern, n, k, len(self.rings)) / n
        if self.pattern == "ring":
            return self.fraction / n
        if self.pattern == "rd":
            return self.fraction  # the member's whole buffer, every step
        half = self.steps // 2 if self.kind == "ar" else self.steps
        if self.kind == "rs" or (self.kind == "ar" and k < half):
            return self.fraction / 2 ** (k + 1)
        j = k - half if self.kind == "ar" else k
        return self.fraction * 2 ** j / n

    def step_dst(self, k):
        """Position each position sends to at step *k* (pairwise patterns; a ring sends to ``i+1``)."""
        pos = np.arange(self.size)
        if self.kind == "a2a":
            return a2a_dst(self.pattern, self.size, k)
        if self.pattern == "ring":
            return (pos + 1) % self.size
        return pos ^ self.step_partner_distance(k)

    def step_partner_distance(self, k):
        """Halving-doubling, recursive-doubling: XOR distance of the step-*k* partner."""
        n = self.size
        if self.pattern == "rd":
            return 1 << k
        half = self.steps // 2 if self.kind == "ar" else self.steps
        if self.kind == "rs" or (self.kind == "ar" and k < half):
            return n >> (k + 1)
        return 1 << (k - half if self.kind == "ar" else k)


@dataclass(frozen=True, eq=False)
class CollectivePlan:
    """The passes of one collective, independent of its size."""

    topology: object
    op: str
    algorithm: str
    group: Group
    bidirectional: bool
    pre: tuple = ()
    """On-chip passes before the chip level (on-chip reduce-scatter)."""
    halves: tuple = ()
    """Per buffer half (two for 2d-split, else one), the chip- or flat-level passes in order."""
    post: tuple = ()
    """On-chip passes after the chip level (on-chip all-gather)."""
    level_sizes: tuple = ()
    """Per half, per data level: ``(directions, ring size)`` (the leaf layout of the data model)."""
    split_time_separated: bool = False
    """2d-split on a square uniform torus: the halves use each axis one after the other."""

    @property
    def passes(self):
        """Every pass, in (pre, half 0, half 1, post) order."""
        return list(self.pre) + [p for half in self.halves for p in half] + list(self.post)

    @property
    def group_size(self):
        return self.group.size


def exchange_members(members):
    """The members ``(R, n)`` of a pairwise-exchange pass as an embedding without ring edges
    (partners are routed per step, see :func:`.messages.hd_routes`); all-to-all's pairwise and
    Bruck passes too."""
    return RingEmbedding(members, np.full(members.shape + (1,), -1, dtype=np.int64),
                         np.zeros(members.shape, dtype=np.int64))


def a2a_steps(pattern, n):
    """Steps of one all-to-all pass over ``n`` members: ``ring`` ``floor(n/2)`` (the farthest
    block is ``floor(n/2)`` hops away either way), ``pw`` ``n-1`` rounds, ``bruck``
    ``ceil(log2 n)``."""
    if n <= 1:
        return 0
    if pattern == "ring":
        return n // 2
    if pattern == "pw":
        return n - 1
    if pattern == "bruck":
        return (n - 1).bit_length()
    raise AssertionError(f"no all-to-all pattern {pattern!r}")


def a2a_dst(pattern, n, k):
    """Position each position sends to at step *k*: ``ring`` the next member, ``pw``
    ``i + k + 1``, ``bruck`` ``i + 2^k`` (mod ``n``)."""
    pos = np.arange(n)
    shift = {"ring": 1, "pw": k + 1, "bruck": 1 << k}[pattern]
    return (pos + shift) % n


def bruck_blocks(n, k):
    """Blocks Bruck's step *k* sends: the offsets ``j`` in ``0..n-1`` with bit *k* set (Bruck et
    al. 1997, Thakur et al. 2005 section 3.3: ``n/2`` when ``n`` is a power of two)."""
    b = 1 << k
    return (n // (2 * b)) * b + max(0, n % (2 * b) - b)


def a2a_step_blocks(pattern, n, k, directions=1):
    """Blocks one step-*k* message carries.

    ``ring`` with two directions: every block goes the shorter way, hop by hop; at step ``k``
    (0-based) member ``i`` forwards the blocks of the member ``k`` hops behind it that still
    have further to go: those of distance ``k+1 .. h`` (``h = floor(n/2)``), i.e. ``h - k``
    blocks, except that with ``n`` even the block at distance ``n/2`` is split, half each
    way, so ``h - k - 1/2``. One direction (``n = 2`` only, where both would use the same
    two links): the one block. ``pw``: one block. ``bruck``: :func:`bruck_blocks`.
    """
    if pattern == "ring":
        if directions == 1:
            assert n <= 2, "a one-direction all-to-all ring is the two-member exchange"
            return float(n - 1 - k)
        h = n // 2
        return h - k - (0.5 if n % 2 == 0 else 0.0)
    if pattern == "pw":
        return 1.0
    return float(bruck_blocks(n, k))
