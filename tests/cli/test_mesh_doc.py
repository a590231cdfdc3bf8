"""docs/mesh.md's examples agree with each other and with a cost worked by hand.

Every figure the page quotes is written by tests/tools/regenerate_docs_numbers.py from the
commands that print it (tests/tools/docs_examples.py) and checked by
tests/project/test_docs_numbers.py, so these tests no longer compare the page's text with the
same commands. They check what that cannot: the rows `plan --search` printed (and the page quotes)
are what `step --mesh` prints on each candidate's mesh, the GPT-3 meshes the page calls feasible
are, and each cost row is chips x step time x price / 3600 worked by hand."""

import contextlib
import io
import json
from pathlib import Path

import pytest

from regenerate_docs_numbers import plain
from wus_sim.cli import main
from wus_sim.inputs.units import format_bytes, format_time

DOC = plain((Path(__file__).resolve().parents[2] / "docs" / "mesh.md").read_text(encoding="utf-8"))


def step(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["step", *argv, "--json"]) == 0
    doc = json.loads(out.getvalue())
    (per,) = doc["strategies"].values()
    return per


V5P = ("llama3-8b", "-t", "tpu-v5p-512", "--megacore", "--global-batch", "256")


@pytest.mark.parametrize("mesh,strategy,remat,where", [
    ("data=8,fsdp=32", "sharded", "none", "1 data=8,fsdp=32"),
    ("data=256", "fully-sharded", "none", "2 data=256"),
    ("data=128,fsdp=2", "fully-sharded", "none", "3 data=128,fsdp=2"),
    ("data=64,fsdp=4", "fully-sharded", "none", "4 data=64,fsdp=4"),
])
def test_the_search_rows_the_doc_shows(mesh, strategy, remat, where):
    per = step(*V5P, "--mesh", mesh, "--strategy", strategy, "--remat", remat)
    line = next(l for l in DOC.splitlines() if l.strip().startswith(where))
    assert format_time(per["step_time_s"]) in line
    assert format_bytes(per["memory_bytes"]["peak"]) in line


def test_the_done_when_commands():
    base = ("gpt3-175b", "-t", "tpu-v5p-1024", "--megacore", "--global-batch", "2048", "--optimizer", "adam",
            "--remat", "full", "--quantization", "int8")
    tp = step(*base, "--mesh", "fsdp=64,tensor=8")
    fsdp = step(*base, "--mesh", "fsdp=512")
    # the tensor mesh fits and pays for its axis; both fit in a v5p chip's 95 GiB
    assert tp["status"] == "ok" and tp["breakdown"]["tensor_comm_s"] > 0
    assert fsdp["status"] == "ok" and fsdp["breakdown"]["tensor_comm_s"] == 0
    assert max(tp["memory_bytes"]["peak"], fsdp["memory_bytes"]["peak"]) < 95 * 2**30


@pytest.mark.parametrize("slice_", ["tpu-v6e-256", "tpu-v5e-256", "tpu-v5p-256"])
def test_the_cost_example_rows_are_what_step_prints(slice_):
    """What it costs: each slice's row (the page quotes each slice's cheapest, data=256 fully sharded,
    its remat in the row) has step's step time, $/step and $/M tok on that mesh at the one global
    batch (256), the cost by hand: chips x step time x the price per chip-hour / 3600."""
    from wus_sim.cli.cost_lines import money

    line = next(l for l in DOC.splitlines() if l.split()[1:3] == [slice_, "data=256"])
    assert line.split()[4] == "fully-sharded"
    remat = line.split()[5]

    rc_out = io.StringIO()
    with contextlib.redirect_stdout(rc_out):
        assert main(["step", "llama3-8b", "-t", slice_, "--mesh", "data=256", "--strategy", "fully-sharded",
                     "--remat", remat, "--global-batch", "256", "--no-megacore", "--json"]) == 0
    doc = json.loads(rc_out.getvalue())
    (per,) = doc["strategies"].values()
    chips, price = doc["price"]["chips"], doc["price"]["usd_per_chip_hour"]
    assert chips == (128 if "v5p" in slice_ else 256)  # v5p-256 names 256 TensorCores, 2 a chip
    hand = chips * per["step_time_s"] * price / 3600
    assert per["cost_usd_per_step"] == pytest.approx(hand, rel=1e-9)
    assert format_time(per["step_time_s"]) in line
    assert money(hand) in line and money(hand / (256 * 8192) * 1e6) in line
