"""The walkthrough notebook executes top to bottom (nbclient, the python3 kernel of this interpreter),
from a directory that is not the checkout, through the public API only, and writes the README's two
figures where it is told to."""

import ast
import os
from pathlib import Path
import re
import sys

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "walkthrough.ipynb"


def execute(env, cwd):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    from jupyter_client.kernelspec import KernelSpecManager

    nb = nbformat.read(NOTEBOOK, as_version=4)
    # The notebook's kernel is 'python3'; make sure it is this interpreter's (ipykernel's native spec).
    specs = KernelSpecManager().find_kernel_specs()
    assert "python3" in specs, f"no python3 kernel spec; found {specs}"
    env = {"PYTHONPATH": os.pathsep.join(sys.path), "WUS_SIM_RESULTS": "", **env}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=300,
                                         resources={"metadata": {"path": str(cwd)}})
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


def text_of(nb):
    return "".join(o.get("text", "") for o in outputs(nb))


def assert_no_errors(nb):
    errors = [o for o in outputs(nb) if o.output_type == "error"]
    assert not errors, f"{errors[0]['ename']}: {errors[0]['evalue']}" if errors else None


def test_notebook_is_stored_without_outputs():
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert not outputs(nb)


def test_notebook_imports_only_the_public_api():
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    public = {"wus_sim", "wus_sim.plotting", "wus_sim.experiments"}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(line for line in cell.source.splitlines() if not line.startswith("%"))
        for node in ast.walk(ast.parse(source)):
            names = ([node.module] if isinstance(node, ast.ImportFrom) else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                if name and name.startswith("wus_sim"):
                    assert name in public, f"the notebook imports {name}, not a public package"
        for name in re.findall(r"\bwus_sim\.([A-Za-z][A-Za-z_]*)", source):
            import wus_sim

            assert name in wus_sim.__all__ or name in ("plotting", "experiments"), name


def test_reduced_run_from_elsewhere_writes_both_figures(tmp_path):
    figures, work = tmp_path / "figures", tmp_path / "elsewhere"
    work.mkdir()
    nb = execute({"WUS_SIM_REDUCED": "1", "WUS_SIM_FIGURES": str(figures), "TMPDIR": str(tmp_path)}, work)
    assert_no_errors(nb)
    text = text_of(nb)
    assert "ran paper_speedup (reduced): 4 points" in text  # 2 slices x 2 workloads of the reduce filter
    for name in ("paper_speedup.png", "validation.png"):
        data = (figures / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000
    assert len([o for o in outputs(nb) if "image/png" in o.get("data", {})]) >= 3
    assert not list(tmp_path.glob("wus-sim-paper-speedup-*"))  # the run's temporary folder is removed
    assert list(work.iterdir()) == []  # nothing written to the working directory


def test_notebook_loads_a_given_results_file(tmp_path):
    from wus_sim.experiments.runner import run_experiment
    from wus_sim.experiments.spec import load_experiment

    from test_experiments_fake import fake_point

    exp = load_experiment("paper_speedup")
    run_experiment(exp, tmp_path / "run", point_fn=fake_point)
    results = tmp_path / "run" / "results.parquet"
    nb = execute({"WUS_SIM_RESULTS": str(results), "WUS_SIM_FIGURES": str(tmp_path / "figures")}, tmp_path)
    assert_no_errors(nb)
    assert f"loaded {2 * exp.num_points} rows from {results}" in text_of(nb)  # a row per strategy


@pytest.mark.slow
def test_full_run_regenerates_the_readme_figures_and_numbers(tmp_path):
    """The full paper experiment and validation (about 20 s): the figures the README shows, and the
    leave-one-benchmark-out validation errors the README states."""
    nb = execute({"WUS_SIM_FIGURES": str(tmp_path)}, tmp_path)
    assert_no_errors(nb)
    text = text_of(nb)
    assert "ran paper_speedup: 24 points" in text
    m = re.search(r"leave-one-benchmark-out median \|error\| ([0-9.]+)%, worst ([0-9.]+)%", text)
    assert m, text
    from regenerate_docs_numbers import plain

    readme = (ROOT / "README.md").read_text() + plain((ROOT / "docs" / "validation.md").read_text())
    assert " ".join(f"median |error| **{m.group(1)} %**, worst **{m.group(2)} %**".split()) in " ".join(readme.split())
    for name in ("paper_speedup.png", "validation.png"):
        assert (tmp_path / name).stat().st_size > 10_000
        assert f"notebooks/figures/{name}" in readme
