"""A small deterministic stand-in for ``wus_sim.experiments.records.simulate_point`` used by the experiment tests.

It follows the same contract (one flat record per strategy, the point's
parameters plus step time, breakdown, memory, status, and ``speedup`` on the
sharded row) with a crude alpha-beta model, so the runner, writer and plots can
be tested without the full simulator. ``bucket_MiB == 13`` makes it raise
InfeasibleError for the whole point, ``bucket_MiB == 666`` a ConfigError; a
large per-replica batch runs out of (fake) HBM. Two environment variables make it useful
for resume tests across processes: ``WUS_FAKE_SLEEP_S`` (seconds per point) and
``WUS_FAKE_LOG`` (a file each call appends the point's hash to).
"""

import os
import time

from wus_sim.inputs.errors import ConfigError, InfeasibleError
from wus_sim.experiments.spec import POINT_KEYS, point_hash, strategies_of
from wus_sim.hardware.topology_files import load_topology

PARAMS = {"resnet50": 25.6e6, "transformer-big": 210.8e6, "ncf": 31.8e6, "bert-large": 336.2e6}
SLOTS = {"sgd": 0, "momentum": 1, "lars": 1, "adam": 2, "lamb": 2, None: 2}
HBM_BYTES = 16 * 2**30


def fake_point(point):
    """Deterministic records for *point*."""
    assert set(point) == set(POINT_KEYS), "the runner passes complete points"
    if os.environ.get("WUS_FAKE_LOG"):
        with open(os.environ["WUS_FAKE_LOG"], "a") as f:
            f.write(point_hash(point) + "\n")
    if os.environ.get("WUS_FAKE_SLEEP_S"):
        time.sleep(float(os.environ["WUS_FAKE_SLEEP_S"]))
    if point["bucket_MiB"] == 13:
        raise InfeasibleError("bucket 13 does not fit", what="hbm")
    if point["bucket_MiB"] == 666:
        raise ConfigError("bucket 666 is rejected by the fake simulator")
    topo = load_topology(point["topology"], link_GBps=point["link_GBps"], wraparound=point["wraparound"])
    n = topo.num_replicas
    params = PARAMS.get(point["workload"], 1e7)
    slots = SLOTS.get(point["optimizer"], 1)
    batch = point["per_replica_batch"] or (point["global_batch"] // n if point["global_batch"] else 8)
    link_Bps = topo.axis_link_Bps[0]
    grad_bytes = 2 if point["grad_dtype"] == "bf16" else 4
    fwd = 2e-4 * batch * params / 25.6e6
    comm = 2 * params * grad_bytes * (n - 1) / n / link_Bps + 2e-6 * sum(topo.dims)
    rows = []
    for strategy in strategies_of(point):
        share = 1 if strategy == "replicated" else n
        update = params * (12 + 8 * slots) / 450e9 / share
        exposed = 0.3 * comm
        mem = {"mem_weights_bytes": 4 * params, "mem_gradients_bytes": 4 * params,
               "mem_slots_bytes": 4 * params * slots / share, "mem_activations_bytes": 5e6 * batch}
        peak = sum(mem.values())
        row = dict(point, strategy=strategy, replicas=n, status="ok", error="",
                   fwd_s=fwd, bwd_s=2 * fwd, update_s=update, exposed_comm_s=exposed,
                   extra_reduction_s=(1e-5 if point["optimizer"] in ("lars", "lamb") and share > 1 else 0.0),
                   batch_norm_s=0.0, idle_s=0.0, overhead_s=1e-3, mem_peak_bytes=peak, hbm_bytes=HBM_BYTES,
                   **mem)
        row["step_time_s"] = sum(row[k] for k in ("overhead_s", "fwd_s", "bwd_s", "batch_norm_s", "update_s",
                                                  "exposed_comm_s", "extra_reduction_s", "idle_s"))
        if peak > HBM_BYTES:
            row.update(status="infeasible", error=f"needs {peak:.3g} B of HBM, has {HBM_BYTES}",
                       step_time_s=None)
        rows.append(row)
    by = {r["strategy"]: r for r in rows}
    if len(by) == 2 and all(r["status"] == "ok" for r in rows):
        by["sharded"]["speedup"] = by["replicated"]["step_time_s"] / by["sharded"]["step_time_s"]
    return rows


def test_fake_follows_the_contract():
    from wus_sim.experiments.spec import complete_point

    rows = fake_point(complete_point({"workload": "transformer-big", "topology": "tpu-v3-32",
                                      "optimizer": "adam"}))
    assert [r["strategy"] for r in rows] == ["replicated", "sharded"]
    rep, sh = rows
    assert sh["speedup"] == rep["step_time_s"] / sh["step_time_s"] > 1
    assert sh["mem_slots_bytes"] * rep["replicas"] == rep["mem_slots_bytes"]
