"""The step arithmetic of the all-to-all algorithms: steps, partners and blocks per message.

Kept apart from :mod:`.alltoall` (which plans) so that :class:`.plan.Pass` can use it without
a circular import. Blocks are counted in units of ``S/n``, one member's block for one peer.
"""

import numpy as np

__all__ = ["a2a_steps", "a2a_dst", "a2a_step_blocks", "bruck_blocks"]


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
