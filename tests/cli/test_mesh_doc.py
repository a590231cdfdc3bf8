"""docs/mesh.md's numbers are what the tool prints: the Llama-3-8B on v5p-512 answer and the
Done-when commands (llama3-70b until gpt3-175b ships)."""

import contextlib
import io
import json
import math
from pathlib import Path
import re

import pytest

from wus_sim.cli import main
from wus_sim.inputs.units import format_bytes, format_time

DOC = (Path(__file__).resolve().parents[2] / "docs" / "mesh.md").read_text(encoding="utf-8")


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


def test_the_answer_paragraph_figures():
    sharded = step(*V5P, "--mesh", "data=256", "--strategy", "sharded", "--remat", "none")
    fsdp = step(*V5P, "--mesh", "fsdp=256", "--remat", "none")
    tensor = step(*V5P, "--mesh", "data=128,tensor=2", "--strategy", "sharded", "--remat", "none")
    layer = step(*V5P, "--mesh", "data=256", "--strategy", "sharded", "--remat", "layer")
    assert (f"(`data=256 sharded none`: {format_time(sharded['step_time_s'])}, "
            f"{format_bytes(sharded['memory_bytes']['peak'])})") in DOC
    assert f"(`fsdp=256`, {format_bytes(fsdp['memory_bytes']['peak'])}) costs " \
           f"{(fsdp['step_time_s'] / sharded['step_time_s'] - 1) * 100:.1f} %" in DOC
    assert f"(`data=128,tensor=2`: {format_time(tensor['step_time_s'])}, " \
           f"{format_time(tensor['breakdown']['tensor_comm_s'])} of" in DOC
    assert f"(`data=256 sharded layer`:\n{format_time(layer['step_time_s'])})" in DOC \
        or f"(`data=256 sharded layer`: {format_time(layer['step_time_s'])})" in DOC


def test_the_done_when_commands():
    base = ("gpt3-175b", "-t", "tpu-v5p-1024", "--megacore", "--global-batch", "2048", "--optimizer", "adam",
            "--remat", "full", "--quantization", "int8")
    tp = step(*base, "--mesh", "fsdp=64,tensor=8")
    fsdp = step(*base, "--mesh", "fsdp=512")
    assert tp["status"] == "ok" and tp["breakdown"]["tensor_comm_s"] > 0
    said = re.search(r"fsdp=64,tensor=8 .*\n.*# feasible: ([\d.]+) s, ([\d.]+) GiB", DOC)
    assert said and said.group(1) == f"{tp['step_time_s']:.1f}"
    assert said.group(2) == f"{tp['memory_bytes']['peak'] / 2**30:.1f}"
    said = re.search(r"fsdp=512 .*\n.*# ([\d.]+) s, ([\d.]+) GiB", DOC)
    assert said and said.group(1) == f"{fsdp['step_time_s']:.1f}"
    assert said.group(2) == f"{fsdp['memory_bytes']['peak'] / 2**30:.1f}"


def test_the_replicated_range_the_doc_states():
    """"the replicated update never fits (A-B GiB a chip under any remat)": A and B are the
    smallest and largest peak (GiB, rounded outward) of pure data parallelism's replicated update over every remat."""
    peaks = [step(*V5P, "--mesh", "data=256", "--strategy", "replicated", "--remat", r)["memory_bytes"]["peak"]
             for r in ("none", "selective", "layer", "full")]
    said = re.search(r"never fits \((\d+)-(\d+) GiB a chip under any remat\)", DOC)
    assert said and (int(said.group(1)), int(said.group(2))) == (math.floor(min(peaks) / 2**30), math.ceil(max(peaks) / 2**30))



@pytest.mark.parametrize("slice_,remat,where", [
    ("tpu-v6e-256", "selective", "1 tpu-v6e-256 data=256"),
    ("tpu-v5e-256", "layer", "125 tpu-v5e-256 data=256"),
    ("tpu-v5p-256", "none", "209 tpu-v5p-256 data=256"),
])
def test_the_cost_example_rows_are_what_step_prints(slice_, remat, where):
    """What it costs: each row's step time, $/step and $/M tok are step's on that mesh at the one
    global batch (256), the cost by hand: chips x step time x the price per chip-hour / 3600."""
    from wus_sim.cli.cost_lines import money

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
    line = next(l for l in DOC.splitlines() if l.strip().startswith(where))
    assert format_time(per["step_time_s"]) in line
    assert money(hand) in line and money(hand / (256 * 8192) * 1e6) in line
