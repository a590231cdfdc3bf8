"""Data replay of an all-to-all schedule, independent of the planner's step arithmetic.

Each pass of an all-to-all plan is an all-to-all inside each of its rings, on *units*
``(origin, target)`` of ring positions (in a 2d pass a unit is every block bound for one
column). Which units a message carries is written here again from the algorithms'
definitions (the bidirectional ring forwards the blocks of the member ``k`` behind that are
still in transit, pairwise sends its own block for ``i+k+1``, Bruck the blocks whose offset has
bit ``k`` set), then replayed in time order: a sender holds every unit it sends by the
message's ready time, the bytes equal the units' weight times a block, every unit reaches its
target, and a member starts a pass only after everything of its previous pass reached it.
"""

import numpy as np

from wus_sim.collectives.schedules.messages import passes_by_tag

__all__ = ["replay_a2a"]


def _units(p, n, D, i, k):
    """``[((origin, target), weight), ...]`` of the step-*k* message from position *i*."""
    if p.pattern == "ring":
        o = (i - k) % n
        h = n // 2 if D == 2 else n - 1
        return [((o, (o + d) % n), 0.5 if (D == 2 and n % 2 == 0 and d == h) else 1.0)
                for d in range(k + 1, h + 1)]
    if p.pattern == "pw":
        return [((i, (i + k + 1) % n), 1.0)]
    b = 1 << k
    out = []
    for j in range(1, n):
        if j & b:
            o = (i - (j % b)) % n
            out.append(((o, (o + j) % n), 1.0))
    return out


def replay_a2a(sched, ready_t, deliver_t):
    """Problems found (an empty list when the schedule delivers every block)."""
    plan = sched.plan
    tags = passes_by_tag(plan)
    meta = sched.meta
    nodes = meta["node"]
    ready = np.asarray(ready_t)[nodes]
    deliver = np.asarray(deliver_t)[nodes]
    problems = []
    held = {}  # (tag, dir, ring, position) -> {unit: time held since}
    weight = {}  # (tag, ring, unit) -> summed weight delivered to the target
    last_in, first_out = {}, {}  # (half, pass index, member id) -> times
    for j in np.argsort(ready, kind="stable"):
        tag, d, r = int(meta["pass"][j]), int(meta["dir"][j]), int(meta["ring"][j])
        i, k, z = int(meta["pos"][j]), int(meta["step"][j]), int(meta["dst"][j])
        p = tags[tag]
        e = p.rings[d]
        n, D = p.size, len(p.rings)
        units = _units(p, n, D, i, k)
        mine = held.setdefault((tag, d, r, i), {})
        for u, _ in units:
            if u[0] != i and mine.get(u, np.inf) > ready[j]:
                problems.append(f"pass {tag} step {k}: position {i} sends {u} before holding it")
        block = p.fraction * sched.nbytes / n
        if not np.isclose(sum(w for _, w in units) * block, sched.msg_bytes[nodes[j]], rtol=1e-12):
            problems.append(f"pass {tag} step {k}: {sched.msg_bytes[nodes[j]]} bytes for units {units}")
        got = held.setdefault((tag, d, r, z), {})
        for u, w in units:
            got[u] = min(got.get(u, np.inf), deliver[j])
            if u[1] == z:  # by member ids: the reverse ring numbers its positions the other way
                key = (tag, r, int(e.members[r, u[0]]), int(e.members[r, u[1]]))
                weight[key] = weight.get(key, 0.0) + w
        half, idx = (tag - 1) // 1000, (tag - 1) % 1000
        a, b = int(e.members[r, i]), int(e.members[r, z])
        first_out[(half, idx, a)] = min(first_out.get((half, idx, a), np.inf), ready[j])
        last_in[(half, idx, b)] = max(last_in.get((half, idx, b), -np.inf), deliver[j])
    for tag, p in tags.items():
        members = p.rings[0].members
        for r in range(p.rings[0].num_rings):
            for o in members[r].tolist():
                for t in members[r].tolist():
                    w = weight.get((tag, r, o, t), 0.0)
                    if o != t and not np.isclose(w, 1.0):
                        problems.append(f"pass {tag} ring {r}: block {o} -> {t} delivered {w} times")
    for (half, idx, m), t in first_out.items():
        if idx > 0 and last_in.get((half, idx - 1, m), -np.inf) > t:
            problems.append(f"member {m} starts pass {idx} of half {half} before its pass {idx - 1} reached it")
    return problems
