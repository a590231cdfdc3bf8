"""The walkthrough notebook executes top to bottom (nbclient, the python3 kernel of this interpreter)."""

import os
from pathlib import Path
import sys

import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "walkthrough.ipynb"


def execute(env):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    from jupyter_client.kernelspec import KernelSpecManager

    nb = nbformat.read(NOTEBOOK, as_version=4)
    # The notebook's kernel is 'python3'; make sure it is this interpreter's (ipykernel's native spec).
    specs = KernelSpecManager().find_kernel_specs()
    assert "python3" in specs, f"no python3 kernel spec; found {specs}"
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=120,
                                         resources={"metadata": {"path": str(NOTEBOOK.parent)}})
        client.execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return nb


def outputs(nb):
    return [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]


def test_notebook_is_stored_without_outputs():
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert not outputs(nb)


def test_notebook_runs_the_quickstart_and_draws_every_plot(tmp_path):
    # the kernel's temporary files go under tmp_path, so the test can see that the run's are removed
    nb = execute({"WUS_SIM_RESULTS": "", "PYTHONPATH": os.pathsep.join(sys.path), "TMPDIR": str(tmp_path)})
    errors = [o for o in outputs(nb) if o.output_type == "error"]
    assert not errors, errors[0]["evalue"] if errors else None
    images = [o for o in outputs(nb) if "image/png" in o.get("data", {})]
    # speedup, breakdown, memory, and one heatmap per workload of the quickstart (2)
    assert len(images) >= 5
    text = "".join(o.get("text", "") for o in outputs(nb))
    assert "ran quickstart:" in text
    assert not list(tmp_path.glob("wus-sim-quickstart-*"))


def test_notebook_loads_a_given_results_file(tmp_path):
    from wus_sim.experiments.runner import run_experiment
    from wus_sim.experiments.spec import load_experiment

    from test_experiments_fake import fake_point

    exp = load_experiment(NOTEBOOK.parent.parent / "experiments" / "quickstart.yaml")
    run_experiment(exp, tmp_path, point_fn=fake_point)
    nb = execute({"WUS_SIM_RESULTS": str(tmp_path / "results.parquet"), "PYTHONPATH": os.pathsep.join(sys.path)})
    assert not [o for o in outputs(nb) if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs(nb))
    assert f"loaded {2 * exp.num_points} rows from {tmp_path / 'results.parquet'}" in text  # a row per strategy
    assert len([o for o in outputs(nb) if "image/png" in o.get("data", {})]) >= 5
