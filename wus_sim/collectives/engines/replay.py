"""Data replay: what every message of a simulated schedule carries, checked to the last leaf.

Used by the tests (and by anyone checking a new algorithm): it proves a schedule
delivers every byte exactly once, whatever the engine's timing.
"""

import numpy as np

from ...hardware.network import tie_key
from ..schedules.messages import passes_by_tag

__all__ = ["replay_data"]


def _leaf_layout(plan):
    """Per half: leaf shape ``(D1, n1, D2, n2, ..., cores, K-slot)`` without the piece axis."""
    c = plan.topology.cores_per_chip if plan.group.kind != "list" else 1
    return [tuple(x for d, n in sizes for x in (d, n)) + (c,) for sizes in plan.level_sizes] or [(c,)]


def replay_data(sched, ready_t, deliver_t):
    """Replay what every message carries, in time order, and check the result.

    Each replica holds, per leaf of the buffer, a count per contributing
    replica. Reduce-scatter steps add the sender's counts into the receiver's,
    all-gather steps overwrite them; a message's payload is the sender's state
    at its ready time. Returns a dict with ``shards`` (replica -> leaf ids),
    ``ok`` and ``problems`` (list of strings): after reduce-scatter every
    replica holds its shard summed exactly once over its group, after
    all-gather and all-reduce every replica holds every leaf complete, and no
    all-gather message ever carries an incomplete leaf.
    """
    plan = sched.plan
    topo = plan.topology
    K = sched.chunks
    c = topo.cores_per_chip
    flat = plan.group.kind == "list"
    layouts = _leaf_layout(plan)
    per_half = int(np.prod(layouts[0])) * K
    H = max(1, len(plan.halves))
    L = per_half * H
    R = topo.num_replicas
    groups = _replica_groups(plan)
    group_of = np.full(R, -1, np.int64)
    for gi, g in enumerate(groups):
        group_of[g] = gi
    member_mask = np.zeros((len(groups), R), bool)
    for gi, g in enumerate(groups):
        member_mask[gi, g] = True
    shards = _shards(plan, K, layouts, per_half)
    state = np.zeros((R, L, R), np.int16)
    op = plan.op
    for r in range(R):
        if group_of[r] < 0:
            continue
        if op == "all-gather":
            state[r][np.ix_(shards[r], member_mask[group_of[r]].nonzero()[0])] = 1
        else:
            state[r, :, r] = 1
    meta = sched.meta
    nodes = meta["node"]
    passes = passes_by_tag(plan)
    problems = []
    # events: deliveries (0) before sends (1) at equal times, "equal" as the engines mean it
    # (one tie_key): a send that waited for two deliveries of one slot is ready at the time of
    # the one handled last, which can be an ulp below the other's (sums taken in other orders)
    events = [(tie_key(ready_t[m]), 1, j) for j, m in enumerate(nodes)] \
        + [(tie_key(deliver_t[m]), 0, j) for j, m in enumerate(nodes)]
    events.sort()
    payload = {}
    # recursive-doubling sends and receives the same leaves at a step: what arrives is summed
    # only once the receiver's own message of that step and piece has left (a separate receive
    # buffer, as MPI_Sendrecv has), so an early arrival waits for that send
    sent, waiting = set(), {}
    for t, what, j in events:
        tag = int(meta["pass"][j])
        p = passes[tag]
        d, r, i, k, piece = (int(meta[x][j]) for x in ("dir", "ring", "pos", "step", "piece"))
        leaves = _message_leaves(plan, p, layouts, per_half, d, r, i, k, piece, K)
        e = p.rings[d]
        src_member = int(e.members[r, i])
        dst_member = int(e.members[r, int(meta["dst"][j])])
        src_rep, dst_rep = _holders(p, src_member, leaves, layouts, per_half, c, flat), \
            _holders(p, dst_member, leaves, layouts, per_half, c, flat)
        reduce = k < p.rs_steps
        if what == 1:
            data = state[src_rep, leaves].copy()
            if not reduce:
                g = member_mask[group_of[src_rep]]
                if not np.array_equal(data, g.astype(np.int16)):
                    problems.append(f"all-gather message {nodes[j]} carries incomplete data")
            payload[j] = data
            sent.add((tag, d, r, i, k, piece))
            for dst, held, early in waiting.pop((tag, d, r, i, k, piece), ()):
                state[dst, held] += early
        else:
            data = payload.pop(j)
            own = (tag, d, r, int(meta["dst"][j]), k, piece)
            if p.pattern == "rd" and own not in sent:
                waiting.setdefault(own, []).append((dst_rep, leaves, data))
            elif reduce:
                state[dst_rep, leaves] += data
            else:
                state[dst_rep, leaves] = data
    for r in range(R):
        if group_of[r] < 0:
            continue
        want = member_mask[group_of[r]].astype(np.int16)
        held = state[r, shards[r]] if op == "reduce-scatter" else state[r]
        if not np.array_equal(held, np.broadcast_to(want, held.shape)):
            problems.append(f"replica {r} does not end with its {'shard' if op == 'reduce-scatter' else 'buffer'} "
                            "complete and summed once")
    return {"ok": not problems, "problems": problems, "shards": shards, "leaves": L}


def _replica_groups(plan):
    topo = plan.topology
    c = topo.cores_per_chip
    g = plan.group
    if g.kind == "list":
        return [np.array(g.replicas)]
    if g.kind == "all":
        return [np.arange(topo.num_replicas)]
    lines = topo.axis_rings(g.axis)
    return [(line[:, None] * c + np.arange(c)[None, :]).ravel() for line in lines]


def _positions(p, member):
    """Position of *member* in each direction's ring of pass *p*: list of (d, pos)."""
    out = []
    for d, e in enumerate(p.rings):
        r, i = np.argwhere(e.members == member)[0]
        out.append((d, int(i)))
    return out


def _level_passes(plan, h):
    """Per data level of half *h*: one pass at that level (for member positions)."""
    out = {}
    for p in plan.halves[h]:
        out.setdefault(p.data_level, p)
    return out


def _shards(plan, K, layouts, per_half):
    topo = plan.topology
    c = topo.cores_per_chip
    flat = plan.group.kind == "list"
    shards = {}
    for r in range(topo.num_replicas):
        member = r if flat else r // c
        core = 0 if flat else r % c
        leaves = []
        for h, layout in enumerate(layouts):
            if h >= max(1, len(plan.halves)):
                break
            levels = _level_passes(plan, h) if plan.halves else {}
            sel = []
            for lvl in range(len(layout) // 2):
                p = levels[lvl]
                if p.pattern != "ring":  # pairwise exchange: one direction, member at its rank
                    mask_d = np.ones(layout[2 * lvl], bool)
                    mask_n = np.zeros(layout[2 * lvl + 1], bool)
                    where = np.argwhere(p.rings[0].members == member)
                    if len(where) == 0:
                        sel = None
                        break
                    mask_n[where[0][1]] = True
                    sel.append(np.outer(mask_d, mask_n))
                    continue
                m = np.zeros((layout[2 * lvl], layout[2 * lvl + 1]), bool)
                try:
                    for d, i in _positions(p, member):
                        m[d, i] = True
                except IndexError:
                    sel = None
                    break
                sel.append(m)
            if sel is None:
                continue
            core_mask = np.zeros(layout[-1], bool)
            core_mask[core] = True
            leaves.append(h * per_half + _leaf_ids(layout, sel, core_mask, None, K))
        shards[r] = np.concatenate(leaves) if leaves else np.zeros(0, np.int64)
    return shards


def _leaf_ids(layout, level_masks, core_mask, piece, K):
    """Leaf ids (within a half) selected by per-level (D, n) masks, a core mask and a piece."""
    full = np.ones(layout + (K,), bool)
    for lvl, m in enumerate(level_masks):
        shape = [1] * (len(layout) + 1)
        shape[2 * lvl], shape[2 * lvl + 1] = m.shape
        full &= m.reshape(shape)
    shape = [1] * (len(layout) + 1)
    shape[-2] = len(core_mask)
    full &= core_mask.reshape(shape)
    if piece is not None:
        pm = np.zeros(K, bool)
        pm[piece] = True
        full &= pm
    return np.flatnonzero(full.ravel())


def _message_leaves(plan, p, layouts, per_half, d, r, i, k, piece, K):
    e = p.rings[d]
    member = int(e.members[r, i])
    n = p.size
    if p.level == "core":
        q = (i - k - 1) % n if k < p.rs_steps else (i - (k - p.rs_steps)) % n
        out = []
        for h, layout in enumerate(layouts[: max(1, len(plan.halves))]):
            core_mask = np.zeros(layout[-1], bool)
            core_mask[q] = True
            out.append(h * per_half + _leaf_ids(layout, [], core_mask, piece, K))
        return np.concatenate(out)
    h = p.half
    layout = layouts[h]
    levels = _level_passes(plan, h)
    masks = []
    for lvl in range(p.data_level):
        lp = levels[lvl]
        m = np.zeros((layout[2 * lvl], layout[2 * lvl + 1]), bool)
        for dd, ii in _positions(lp, member):
            m[dd, ii] = True
        masks.append(m)
    m = np.zeros((layout[2 * p.data_level], layout[2 * p.data_level + 1]), bool)
    if p.pattern == "ring":
        x = (i - k - 1) % n if k < p.rs_steps else (i - (k - p.rs_steps)) % n
        m[d, x] = True
    elif p.pattern == "rd":
        m[0, :] = True  # recursive-doubling: the member's whole buffer of this level, every step
    else:
        dist = p.step_partner_distance(k)
        if k < p.rs_steps:
            lo = (i ^ dist) & ~(dist - 1)
        else:
            lo = i & ~(dist - 1)
        m[0, lo:lo + dist] = True
    masks.append(m)
    core_mask = np.ones(layout[-1], bool)
    return h * per_half + _leaf_ids(layout, masks, core_mask, piece, K)


def _holders(p, member, leaves, layouts, per_half, c, flat):
    """Replica holding each leaf of a message at *member* of pass *p*."""
    if p.level in ("core", "flat"):
        return np.full(len(leaves), member)
    # the core index is the second-to-last axis of the leaf layout (pieces last)
    K = per_half // int(np.prod(layouts[0]))
    core = ((leaves % per_half) // K) % layouts[0][-1]
    return member * c + core
