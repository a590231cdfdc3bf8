"""The worked examples of docs/model-error.md, docs/mesh.md and docs/precision-and-remat.md, written by
running their commands (sources of tests/tools/regenerate_docs_numbers.py, :data:`EXAMPLE_SOURCES`).

Each function runs one example and returns ``{span key: text}``. Where the prose around a figure
states an outcome (a policy "does not fit", a chip is "cheapest"), the function checks it and
raises, so a change in the model that turns the sentence false fails the docs test as a stale
figure would. A block that quotes a command's output shortened (`...`) is shortened here by rule,
from the real output, so every figure in it is today's.
"""

import re

from docs_commands import cli, gib, millis, seconds, step

__all__ = ["EXAMPLE_SOURCES", "band_numbers", "search_numbers", "cost_numbers", "multislice_numbers",
           "gpt3_mesh_numbers", "bound_numbers", "remat_numbers", "stages_numbers"]


def _fence(command, lines, lang=""):
    """A fenced block: ``$ wus-sim COMMAND`` then *lines*, between blank-line-free fences."""
    head = f"$ wus-sim {command}\n" if command else ""
    return f"\n```{lang}\n{head}" + "\n".join(lines) + "\n```\n"


def _usd(usd):
    """Dollars as `wus-sim` prints them (:func:`wus_sim.cli.cost_lines.money`), cents always two digits."""
    from wus_sim.cli.cost_lines import money

    text = money(usd)
    whole, dot, frac = text.partition(".")
    return text if len(frac) >= 2 else f"{whole}.{frac:0<2}"


BAND_COMMAND = "step resnet50 -t tpu-v5e-64 --strategy replicated"


def band_numbers():
    """docs/model-error.md, the extrapolated band: the declared ranges of a never-measured chip (the
    table) and what `step` prints for one (the block, its reasons' trailing pointer shortened)."""
    from wus_sim.model.calibration import load_calibration
    from wus_sim.training.bands import extrapolated_ranges

    out = cli(BAND_COMMAND).splitlines()
    wanted = ("step time ", "95% band (extrapolated)", "extrapolated: ")
    shown = [line for line in out if line.strip().startswith(wanted)]
    if [next(w for w in wanted if line.strip().startswith(w)) for line in shown] != list(wanted):
        raise RuntimeError(f"wus-sim {BAND_COMMAND}: no extrapolated band in its output")
    shown[-1] = re.sub(r"; [^;()]*\)$", "; ...)", shown[-1])
    ranges = extrapolated_ranges(load_calibration(), "tpu-v5e", None)
    mxu = ranges.get("matmul_peak_fraction") or ranges["mxu_efficiency"]
    op, per_step = ranges["op_overhead_s"], ranges["step_overhead_s"]
    return {"band.example": _fence(BAND_COMMAND, shown),
            "band.mxu_range": " - ".join(f"{v:.1f}" if round(v, 1) == v else f"{v:g}" for v in mxu),
            "band.elementwise_range": "{:g} - {:g} B".format(*ranges["elementwise_fwd_bytes"]),
            "band.op_range": f"{op[0] * 1e6:g} - {op[1] * 1e6:.1f} us",
            "band.step_max": f"{per_step[1] * 1e6:g}" + (" us" if per_step[1] else "")}


SEARCH_COMMAND = "plan llama3-8b -t tpu-v5p-512 --megacore --search --global-batch 256"
SEARCH_ROWS = 4
"""docs/mesh.md shows the search's table header and its first rows."""
ANSWER = "llama3-8b -t tpu-v5p-512 --megacore --global-batch 256 --mesh {mesh} --strategy {strategy} --remat {remat}"


def search_numbers():
    """docs/mesh.md, the answer for Llama-3-8B on v5p-512: `plan --search`'s counts, header and top
    rows, the first row's cost by hand, and the answer paragraph's steps on single meshes (the
    replicated update's range: the smallest and largest peak over every remat, in whole GiB
    rounded outward)."""
    import json
    import math

    from wus_sim.inputs.units import format_bytes, format_time

    text = cli(SEARCH_COMMAND).splitlines()
    head = next(i for i, line in enumerate(text) if line.split()[:2] == ["#", "mesh"])
    doc = json.loads(cli(SEARCH_COMMAND + " --json"))
    (where,) = doc["topologies"]
    first, ties = doc["candidates"][0], doc["ties"][0]
    out = {"search.rows": _fence("", text[head:head + 1 + SEARCH_ROWS]),
           "search.candidates": str(len(doc["candidates"])), "search.fit": str(doc["feasible"]),
           "search.meshes": str(len({c["mesh"] for c in doc["candidates"]})),
           "search.heads": str(doc["infeasible"].get("heads", 0)), "search.memory": str(doc["infeasible"].get("memory", 0)),
           "search.step1": format_time(first["step_time_s"]), "search.price": f"${where['price']['usd_per_chip_hour']:.2f}",
           "search.cost1": _usd(first["cost_usd_per_step"]),
           "search.ties": f"`ties #{ties['ranks'][0]}-#{ties['ranks'][1]}`", "search.tied": str(ties["ranks"][1]),
           "search.ties_low": format_bytes(ties["mem_peak_bytes"][0]), "search.ties_high": format_bytes(ties["mem_peak_bytes"][1])}

    def one(mesh, strategy, remat):
        (s,) = step(ANSWER.format(mesh=mesh, strategy=strategy, remat=remat))["strategies"].values()
        return s

    replicated = [one("data=256", "replicated", r) for r in ("none", "selective", "layer", "full")]
    if any(r["status"] == "ok" for r in replicated):
        raise RuntimeError("docs/mesh.md says the replicated update never fits on v5p-512: it does now")
    peaks = [r["memory_bytes"]["peak"] for r in replicated]
    shd, fsd = one("data=256", "sharded", "none"), one("fsdp=256", "fully-sharded", "none")
    tensor, layer = one("data=128,tensor=2", "sharded", "none"), one("data=256", "sharded", "layer")
    out.update({
        "search.rep_range": f"{math.floor(min(peaks) / 2**30)}-{math.ceil(max(peaks) / 2**30)}",
        "search.shd_step": format_time(shd["step_time_s"]), "search.shd_peak": format_bytes(shd["memory_bytes"]["peak"]),
        "search.fsd_peak": format_bytes(fsd["memory_bytes"]["peak"]),
        "search.fsd_cost": f"{(fsd['step_time_s'] / shd['step_time_s'] - 1) * 100:.1f}".replace("-0.0", "0.0"),
        "search.compute": format_time(shd["breakdown"]["fwd_s"] + shd["breakdown"]["bwd_s"]),
        "search.exposed": f"{shd['breakdown']['exposed_comm_s'] * 1e3:.0f} ms",
        "search.tensor_step": format_time(tensor["step_time_s"]),
        "search.tensor_comm": format_time(tensor["breakdown"]["tensor_comm_s"]),
        "search.layer_step": format_time(layer["step_time_s"])})
    return out


COST_COMMAND = "plan llama3-8b --search --rank cost -t tpu-v5e-256 -t tpu-v5p-256 -t tpu-v6e-256 --no-megacore"
COST_SOURCE_CUT = {"tpu-v5e": "Iowa (us-central1),", "tpu-v5p": "holds it", "tpu-v6e": "East US,"}
"""Where docs/mesh.md shortens each chip's price source in the header (`...` follows)."""


def cost_numbers():
    """docs/mesh.md, what it costs: the three-slice search by cost, shortened (the header's reasons,
    each price's source after its region, the columns between $/M tok and the peak, every row but
    the first of each slice), and each slice's cheapest million tokens (as its row prints it, cents
    in two digits)."""
    text = cli(COST_COMMAND).splitlines()
    header = re.sub(r"(, the first -t), [^)]*\)", r"\1, ...)", text[0])
    header = header[:header.index("cheapest first") + len("cheapest first")] + " ..."
    prices = []
    for line in text[1:]:
        m = re.match(r"  (tpu-\w+)-\d+ \(", line)
        if m:
            chip = m.group(1)
            cut = line.index(COST_SOURCE_CUT[chip]) + len(COST_SOURCE_CUT[chip])
            prices.append(line[:cut] + " ...)")
    head = next(i for i, line in enumerate(text) if line.split()[:2] == ["#", "slice"])
    columns = text[head]
    keep = columns.index("$/M tok") + len("$/M tok")
    peak = columns.index("peak/device") - 2

    def short(line):
        return line[:keep] + " ..." + line[peak:]

    rows, seen, cheapest = [], set(), {}
    for line in text[head + 1:]:
        cells = line.split()
        if not cells or not cells[0].isdigit():
            continue
        if cells[1] not in seen:
            seen.add(cells[1])
            rows += ([] if not rows else ["   ..."]) + [short(line).rstrip()]
            cheapest[cells[1]] = line[:keep].split()[-1]
    if list(cheapest) != ["tpu-v6e-256", "tpu-v5e-256", "tpu-v5p-256"]:
        raise RuntimeError(f"docs/mesh.md ranks v6e, v5e, v5p by cost: the search ranks {list(cheapest)}")
    return {"cost.search": _fence("", [header, *prices, short(columns), *rows]),
            **{f"cost.{t.split('-')[1]}_mtok": f"{v}0" if re.fullmatch(r"\$\d+\.\d", v) else v
               for t, v in cheapest.items()}}


MULTISLICE = "llama3-8b -t tpu-v5p-512 --megacore --mesh fsdp=256"


def multislice_numbers():
    """docs/mesh.md, DCN axes: fsdp=256 in each of 32 slices, data across them (what `comm.data`
    counts, and the exposed DCN wait), and the step's growth from one slice to 32."""
    one = step(MULTISLICE)
    doc = step(MULTISLICE + " --dcn-mesh data=32")
    (s1,), (s32,) = one["strategies"].values(), doc["strategies"].values()
    data = doc["mesh"]["comm"]["data"]
    return {"dcn.collectives": str(data["dcn_collectives"]), "dcn.nbytes": f"{data['dcn_nbytes']:,.0f}",
            "dcn.params": f"{doc['params'] / 1e9:.2f} B",
            "dcn.busy": millis(data["dcn_busy_s"]), "dcn.exposed": millis(s32["breakdown"]["data_comm_s"]),
            "dcn.growth": f"{(s32['step_time_s'] / s1['step_time_s'] - 1) * 100:.1f} %"}


GPT3_MESH = ("gpt3-175b -t tpu-v5p-1024 --megacore --mesh {mesh} --global-batch 2048 --optimizer adam --remat full"
             " --quantization int8")


def gpt3_mesh_numbers():
    """docs/mesh.md, GPT-3 175B on v5p-1024: the commands with what they give (a block), and the
    tensor axis's exposed collectives with and without collective matmuls."""
    tp = step(GPT3_MESH.format(mesh="fsdp=64,tensor=8"))["strategies"]
    fsdp = step(GPT3_MESH.format(mesh="fsdp=512"))["strategies"]
    whole = step(GPT3_MESH.format(mesh="fsdp=64,tensor=8") + " --no-collective-matmul")["strategies"]
    (tp,), (fsdp,), (whole,) = tp.values(), fsdp.values(), whole.values()
    if tp["status"] != "ok" or fsdp["status"] != "ok":
        raise RuntimeError("docs/mesh.md says both GPT-3 meshes on v5p-1024 fit: one does not now")

    def said(s):
        return f"{s['step_time_s']:.1f} s, {s['memory_bytes']['peak'] / 2**30:.1f} GiB a chip"

    lines = ["wus-sim step gpt3-175b -t tpu-v5p-1024 --megacore --mesh fsdp=64,tensor=8 --global-batch 2048 \\",
             f"    --optimizer adam --remat full --quantization int8 --json   # feasible: {said(tp)}",
             "wus-sim step gpt3-175b -t tpu-v5p-1024 --megacore --mesh fsdp=512 --global-batch 2048 \\",
             f"    --optimizer adam --remat full --quantization int8 --json   # {said(fsdp)}",
             "wus-sim step gpt3-175b -t tpu-v5e-256 --dcn-mesh data=16 --mesh fsdp=16,tensor=16 \\",
             "    --global-batch 2048 --optimizer adam --remat full          # sixteen v5e slices over the DCN"]
    return {"gpt3.commands": _fence("", lines, "bash"),
            "gpt3.tp_tensor": f"{tp['breakdown']['tensor_comm_s']:.2f} s", "gpt3.tp_step": f"{tp['step_time_s']:.1f} s",
            "gpt3.whole_tensor": f"{whole['breakdown']['tensor_comm_s']:.2f} s",
            "gpt3.whole_step": f"{whole['step_time_s']:.1f} s"}


def bound_numbers():
    """docs/mesh.md, checked against a measured run: MLPerf v0.7's Transformer on 8,192 v3 cores
    (`wus-sim validate`'s bound row)."""
    from wus_sim.validation.validate import validate

    (row,) = [r for r in validate() if r.workload == "transformer-big" and r.cores == 8192 and r.kind == "bound"]
    return {"bound.tfm_simulated": f"{row.simulated_step_s * 1e3:.2f} ms",
            "bound.tfm_measured": f"{row.measured_step_s * 1e3:.2f} ms", "bound.tfm_over": f"{100 * row.error:.1f} %"}


REMAT_V5E = "llama3-8b -t tpu-v5e-256 --strategy fully-sharded --per-replica-batch 1 {remat}"
INT8_COMMAND = "gpt3-175b -t tpu-v5p-1024 --megacore --global-batch 2048 --optimizer adam --remat full --quantization int8"
SELECTIVE_GPT3 = ("gpt3-175b -t tpu-v5p-1024 --megacore --per-replica-batch 4 --optimizer adam --remat selective"
                  " --strategy fully-sharded")


def remat_numbers():
    """docs/precision-and-remat.md: the remat policies of llama3-8b fully sharded on v5e-256 (one
    sequence a chip), the int8 note `step` prints (shortened after "as bf16"), and GPT-3's
    activations under selective remat at 4 sequences a chip."""
    runs = {}
    for tag, remat in (("minimal", "--remat-policy minimal"), ("sdem", "--remat-policy save_dot_except_mlp"),
                       ("qkv", "--remat-policy qkv_proj_offloaded"), ("moff", "--remat-policy minimal_offloaded"),
                       ("layer", "--remat layer")):
        (runs[tag],) = step(REMAT_V5E.format(remat=remat))["strategies"].values()
    fits = {tag: s["status"] == "ok" for tag, s in runs.items()}
    peak = {tag: s["memory_bytes"]["peak"] for tag, s in runs.items()}
    t = {tag: s["step_time_s"] for tag, s in runs.items() if fits[tag]}
    # what the prose says of them: minimal alone does not fit; qkv in less than sdem; minimal_offloaded faster
    if fits != {"minimal": False, "sdem": True, "qkv": True, "moff": True, "layer": True} or not (
            peak["qkv"] < peak["sdem"] and t["moff"] < min(t["sdem"], t["qkv"])):
        raise RuntimeError(f"docs/precision-and-remat.md's remat example no longer holds: fits {fits}, steps {t}")
    out = {f"remat.{tag}_peak": gib(peak[tag]) for tag in ("minimal", "sdem", "qkv")}
    out.update({f"remat.{tag}_step": seconds(t[tag]) for tag in ("sdem", "qkv", "moff", "layer")})
    out["remat.moff_host"] = seconds(runs["moff"]["breakdown"]["host_offload_s"])
    note = step(INT8_COMMAND)["quantization_note"]
    cut = note.index(" as bf16 (") + len(" as bf16 (")
    out["remat.int8_note"] = f"`{note[:cut]}...)`"
    (sel,) = step(SELECTIVE_GPT3)["strategies"].values()
    out["remat.gpt3_selective_act"] = f"{sel['memory_bytes']['activations'] / 2**30:.0f} GiB"
    return out


PIPELINE_GPT3 = "gpt3-175b -t tpu-v5p-2048 --megacore --mesh fsdp=-1,tensor=8 --dcn-mesh pipeline=2"


def stages_numbers():
    """docs/mesh.md, the pipeline axis: what MaxText's defaults make of two stages of GPT-3 (the
    schedule `step` resolved), and the permutes and bubble of one 48-block chunk a stage."""
    from fractions import Fraction

    def bubble(schedule):
        return str(Fraction(schedule["bubble_fraction"]).limit_denominator(10_000))

    default = step(PIPELINE_GPT3)["mesh"]["pipeline"]
    chunk = step(PIPELINE_GPT3 + " --pipeline-layers-per-stage 48")["mesh"]
    gpipe = step(PIPELINE_GPT3 + " --pipeline-schedule gpipe")["mesh"]
    if (chunk["comm"]["pipeline"]["collectives"], bubble(chunk["pipeline"])) != (
            gpipe["comm"]["pipeline"]["collectives"], bubble(gpipe["pipeline"])):
        raise RuntimeError("docs/mesh.md says one 48-block chunk a stage and gpipe cut the permutes alike: they differ")
    return {"stages.microbatches": str(default["microbatches"]), "stages.repeats": str(default["repeats"]),
            "stages.bubble": bubble(default),
            "stages.chunk_permutes": str(chunk["comm"]["pipeline"]["collectives"] - 1),  # less the stages' all-reduce
            "stages.chunk_bubble": bubble(chunk["pipeline"])}


EXAMPLE_SOURCES = {"band": band_numbers, "search": search_numbers, "cost": cost_numbers, "dcn": multislice_numbers,
                   "gpt3": gpt3_mesh_numbers, "bound": bound_numbers, "remat": remat_numbers, "stages": stages_numbers}
"""Key prefix -> the function that computes every key of that prefix (merged into SOURCES)."""
