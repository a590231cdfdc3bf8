"""Each measured tiering row from its MaxText command line (the table's ``maxtext`` column) through
``--maxtext``: the same workload, slice, slices, mesh, mesh across slices, global batch and remat
policy as the validation row runs (wus_sim.validation.tiering), read from the row's own columns.

What each row's command needs was read from its recipe by hand (wus_sim/data/validation/README.md):
rows 5, 6 and 8 carry keys wus-sim approximates as the validation does (rows 5's and 6's dense MoE
matmuls, 6's and 8's bf16 weights); rows 4 and 6 lay their mesh out as MaxText's custom_mesh
hybrid_ring_64x4 does (modelled, as the validation runs them); row 6 has an expert axis, rows 5 and 6
a capacity factor (modelled).
"""

import json

import pytest

from helpers.run_cli import run
from wus_sim.hardware.mesh import MESH_AXES, parse_mesh
from wus_sim.inputs.errors import UnknownNameError
from wus_sim.model.importers.maxtext_model import resolve_workload
from wus_sim.model.ops.remat_names import canonical_policy
from wus_sim.model.workload_files import load_workload
from wus_sim.validation.tiering import simulate_one, tiering_rows

ROWS = {r.row: r for r in tiering_rows()}

APPROXIMATED = {5: {"megablox", "sparse_matmul"}, 6: {"weight_dtype", "megablox", "sparse_matmul"},
                8: {"weight_dtype"}}
"""The keys of each row's recipe that wus-sim runs approximately (the row's notes say each)."""

RINGS = {4: ("tensor", "hybrid_ring_64x4"), 6: ("expert", "hybrid_ring_64x4")}
"""The rows whose recipe lays the mesh out as MaxText's custom_mesh (its axis of 4, the name): both set
allow_split_physical_axes=True, and row 4 runs on 2 slices, so MaxText uses it."""

CHIPS = {"tpu-v6e-256": 256, "tpu-v5p-1024": 512, "tpu-v5p-256": 128}
"""Devices a slice as MaxText counts them (a chip: v6e has one TensorCore, v5p runs as megacore)."""


def _shipped(name):
    try:
        load_workload(name)
    except UnknownNameError:
        return False
    return True


def _plan(row, *extra):
    args = ["plan", "-t", row.topology, "--maxtext", row.maxtext, "--json", *extra]
    if row.row in APPROXIMATED:
        args.append("--maxtext-approximate")
    return run(*args)


def _validation_remat(row):
    if row.remat_policy != "custom":
        return row.remat_policy
    return canonical_policy("custom:" + ",".join(f"{n}=offload" for n in row.offloaded.split(",")))


@pytest.mark.parametrize("number", sorted(ROWS))
def test_each_row_runs_from_its_maxtext_command_line(number):
    row = ROWS[number]
    assert row.maxtext and f"model_name={row.model_name}" in row.maxtext.split()
    if not _shipped(row.model_name):
        pytest.skip(f"MaxText's {row.model_name} is the model library's workload (not shipped on this branch)")
    if number == 6 and "expert" not in MESH_AXES:
        rc, out, err = _plan(row)
        assert rc == 2 and "ici_expert_parallelism=4 (the mesh has no expert axis)" in err and "\n" not in err.strip()
        return
    rc, out, err = _plan(row)
    assert rc == 0, err
    doc = json.loads(out)
    got = doc["maxtext"]["point"]
    # the same model as the validation's workload (Llama 3.1 8B/70B are Llama 3's): its tensors, and at the
    # row's sequence its FLOPs; MaxText's library ships each model at its model file's length (base.yml's
    # 2,048 where it sets none), so rows 2 and 3 (8,192) run the library model rebuilt at that length
    if load_workload(row.model_name).units_per_example != row.sequence:
        assert got["workload"] == f"{row.model_name}@{row.sequence}"
    mine, theirs = resolve_workload(got["workload"]), load_workload(row.workload)
    assert mine.params == theirs.params and mine.units_per_example == row.sequence
    assert mine.fwd_flops_per_example == pytest.approx(theirs.fwd_flops_per_example, rel=1e-12)
    assert doc["topology"].endswith(row.topology)
    assert doc["maxtext"]["slices"] == row.slices
    assert doc["maxtext"]["megacore"] == row.megacore
    assert parse_mesh(got["mesh"]) == parse_mesh(row.mesh)
    if row.slices > 1:
        assert parse_mesh(got["dcn_mesh"], axes=("data", "fsdp")) == parse_mesh(row.dcn_mesh, axes=("data", "fsdp"))
    else:
        assert row.dcn_mesh == "" and "dcn_mesh" not in got
    # MaxText's global batch: per_device_batch_size x every device of every slice
    assert got["global_batch"] == row.per_device_batch * CHIPS[row.topology] * row.slices
    assert got["remat_policy"] == _validation_remat(row)
    assert {a["key"].split("=")[0] for a in doc["maxtext"]["approximated"]} == APPROXIMATED.get(number, set())
    ring = RINGS.get(number)
    assert doc["maxtext"]["custom_mesh"] == (ring and ring[1])
    if ring:  # MaxText's first ring: the 2 x 2 block at the origin, round it (chips x + 16 y)
        assert doc["mesh"]["groups"][ring[0]] == [0, 1, 17, 16]


@pytest.mark.parametrize("number", [5, 6, 8])
def test_rows_with_approximated_keys_are_refused_without_the_flag(number):
    row = ROWS[number]
    rc, out, err = run("plan", "-t", row.topology, "--maxtext", row.maxtext, "--json")
    assert rc == 2 and out == ""
    for key in APPROXIMATED[number]:
        assert key + "=" in err
    assert "--maxtext-approximate" in err and err.count("\n") == 1


def test_a_step_from_the_maxtext_column_is_the_validation_rows_step():
    """Row 7 (Llama 2 70B on 512 v5p chips) by ``step --maxtext``: the step time the validation
    simulates, exactly. The recipe leaves opt_type and gradient clipping at base.yml's defaults
    (AdamW with global-norm clipping at 1.0); the validation runs plain adamw, which --optimizer
    asks beside the run (a default key gives way to an option)."""
    row = ROWS[7]
    rc, out, err = run("step", "-t", row.topology, "--maxtext", row.maxtext, "--optimizer", "adamw", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    (strategy,) = doc["strategies"]
    assert doc["strategies"][strategy]["step_time_s"] == simulate_one(row).simulated_step_s
    assert doc["global_batch"] == simulate_one(row).global_batch
    listed = {e["key"].split("=")[0] for e in doc["maxtext"]["no_effect"]}
    assert {"opt_type", "gradient_clipping_threshold"} <= listed  # said under -v: not used
