"""Mesh steps as records of exact numbers (every float as ``float.hex``): what a mesh without an
expert axis gives, pinned before the axis existed.

``python tests/tools/pin_mesh_records.py OUT [SUFFIX]`` writes the records of :data:`CASES` (each
mesh text + SUFFIX) to OUT. ``tests/data/mesh_before_expert.json`` is its output at commit
4856b9b (the last before the expert axis, whose ``--mesh`` knows no ``expert``; this file ran there
unchanged), re-pinned after each refit of the shipped calibration by running this file on 1da40f0 (the
integration just before the expert axis, which reads today's calibration file) with the refitted file, and tests/training/parallelism/test_expert_axis.py compares today's records of the same
meshes with ``,expert=1`` to it, test_pipeline_axis.py with ``,pipeline=1``: equal to the last bit. Not runtime code and not shipped.
"""

import json
import sys

from wus_sim.hardware.mesh import Placement
from wus_sim.training.parallelism.mesh_step import simulate_mesh
from wus_sim.training.step import StepOptions

CASES = [
    # workload, topology, megacore, slices, mesh, dcn mesh, strategies, a group's batch, options
    ("llama3-8b", "tpu-v5p-256", True, None, "fsdp=32,tensor=4", None, ("fully-sharded",), 4, {"remat": "layer"}),
    ("mixtral-8x7b", "tpu-v5p-256", True, None, "data=16,fsdp=2,tensor=4", None,
     ("replicated", "sharded", "fully-sharded"), 4, {}),
    ("mixtral-8x7b", "tpu-v5p-256", True, None, "fsdp=128", None, ("fully-sharded",), 1, {"remat": "layer"}),
    ("llama2-70b", "tpu-v6e-256", False, 2, "fsdp=64,tensor=4", "fsdp=2", ("fully-sharded",), 4, {"remat": "layer"}),
    ("bert-large", "tpu-v3-32", False, None, "data=8,fsdp=4", None, ("replicated", "sharded"), 8, {}),
    ("mixtral-8x22b", "tpu-v6e-256", False, None, "data=2,fsdp=64,tensor=2", None, ("sharded",), 2, {"remat": "layer"}),
    # 1 GiB buckets: a bucket holds a router and experts' tensors together (with 25 MiB each expert
    # tensor fills buckets of its own)
    ("mixtral-8x7b", "tpu-v5p-256", True, None, "data=4,fsdp=8,tensor=4", None, ("sharded", "fully-sharded"), 4,
     {"bucket_bytes": 2**30}),
]
"""Today's path (pure fsdp) and the mesh path (tensor, hybrid, a DCN fsdp axis, TensorCores),
dense models and MoE ones."""

OLD_COMM_AXES = ("tensor", "fsdp", "data")
NEW_PARTS = ("expert_comm_s", "context_comm_s", "pipeline_bubble_s", "pipeline_comm_s")
"""Breakdown parts added since the pin (each axis's own, 0 at size 1: their tests check that)."""


def _hex(x):
    return float(x).hex() if isinstance(x, (int, float)) and not isinstance(x, bool) else x


def records(suffix=""):
    """``{case: record}`` of :data:`CASES`, each mesh text + *suffix*: only what existed before the
    expert axis (its comm axes, its breakdown parts)."""
    out = {}
    for w, t, megacore, slices, mesh, dcn, strategies, batch, opts in CASES:
        run = simulate_mesh(w, t, None, strategies, per_replica_batch=batch, options=StepOptions(**opts),
                            placement=Placement(megacore=megacore, slices=slices, mesh=mesh + suffix, dcn_mesh=dcn))
        rec = {"per_replica_batch": _hex(run.per_replica_batch), "global_batch": _hex(run.global_batch),
               "replicas": run.replicas, "replicas_per_slice": run.replicas_per_slice, "path": run.mesh.path,
               "comm": {a: {k: _hex(v) for k, v in run.mesh.comm[a].items()} for a in OLD_COMM_AXES}}
        for s, r in run.results.items():
            rec[s] = {"status": r.status, "step_time_s": _hex(r.step_time_s),
                      "breakdown": {k: _hex(v) for k, v in r.breakdown.items() if k not in NEW_PARTS},
                      "memory": {k: (_hex(v) if not isinstance(v, dict) else {a: _hex(b) for a, b in v.items()})
                                 for k, v in r.memory.to_dict().items()},
                      "work": {k: _hex(v) for k, v in r.work.summary().items()}}
        out[f"{w} {t} {mesh} {dcn} {opts}"] = rec
    return out


if __name__ == "__main__":
    with open(sys.argv[1], "w") as f:
        json.dump(records(*sys.argv[2:3]), f, indent=1, sort_keys=True)
        f.write("\n")
