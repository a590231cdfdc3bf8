"""Writes every number the README and the documentation site quote, by running the commands.

    python3 tests/tools/regenerate_docs_numbers.py            # rewrite the marked spans in place
    python3 tests/tools/regenerate_docs_numbers.py --check    # list stale spans, exit 1 if any
    python3 tests/tools/regenerate_docs_numbers.py --bench    # rerun `wus-sim bench` first (minutes)

A quoted figure sits between two HTML comments, invisible on GitHub and in the site:

    <!-- num:llm.v5p.sharded_step -->2.738 s<!-- /num -->

and the text between them is what :data:`SOURCES` prints for that key today. A span may hold a
whole block (a table, a command's output). tests/project/test_docs_numbers.py fails when any
committed span differs from what the code prints, so no quoted number can go stale.

Speed figures depend on the machine: they are quoted from the committed output of `wus-sim bench`
(:data:`BENCH_FILE`, which names the machine's core count) and checked against that file, never
against a live run; `--bench` reruns it on this machine and rewrites the file.
"""

import argparse
from pathlib import Path
import re
import sys

from docs_commands import cli as _cli, gib as _gib, millis as _ms, percent as _pct, seconds as _s, step as _step, times as _x
from docs_examples import EXAMPLE_SOURCES

ROOT = Path(__file__).resolve().parents[2]
BENCH_FILE = ROOT / "docs" / "data" / "bench.txt"
BENCH_CLUSTER_FILE = ROOT / "docs" / "data" / "bench-cluster.txt"
BENCH_SEARCH_FILE = ROOT / "docs" / "data" / "bench-search.txt"
"""The opt-in Dask cluster cases beside the --jobs 2 cases of the same sweeps (issue 45)."""
BENCH_CLUSTER_COMMAND = "bench --repeat 3 --case 'the whole 100,000-point'"
BENCH_SEARCH_COMMAND = "bench --repeat 5 --case 'plan --search'"
SPAN = re.compile(r"<!-- num:([a-z0-9_.\-]+) -->(.*?)<!-- /num -->", re.S)


def plain(text):
    """*text* without the span markers: what a reader sees (tests that read a figure out of the
    prose match this, not the markers)."""
    return SPAN.sub(lambda m: m.group(2), text)


def pages():
    """The Markdown files whose marked spans are generated: the README and every docs page
    (docs/formats/ is generated whole, by `python3 -m wus_sim.docs`)."""
    docs = sorted(p for p in (ROOT / "docs").rglob("*.md") if "formats" not in p.relative_to(ROOT / "docs").parts)
    return [ROOT / "README.md", *docs]


def validation_numbers():
    """`wus-sim validate`: the table of every row and the summary figures."""
    from wus_sim.validation.report import markdown_table
    from wus_sim.validation.validate import summary, validate

    rows = validate()
    s = summary(rows)
    worst = max(r.simulated_overhead_s / r.simulated_step_s for r in rows if not r.not_expressible)
    by_benchmark = ["| benchmark | training-only rows | fit: median \\|error\\| | left out: errors | bound rows kept |",
                    "|---|---|---|---|---|"]
    for bench in sorted({r.benchmark for r in rows}):
        mine = [r for r in rows if r.benchmark == bench and not r.not_expressible]
        exact = [r for r in mine if r.kind == "exact"]
        bounds = [r for r in mine if r.kind == "bound"]
        if exact:
            errors = sorted(abs(r.error) for r in exact)
            fit = f"{100 * errors[len(errors) // 2]:.1f} %"
            out = [100 * r.error_leave_one_benchmark_out for r in exact]
            left = f"{min(out):+.1f} % to {max(out):+.1f} %"
        else:
            fit = left = "-"
        kept = f"{sum(bool(r.within_bound) for r in bounds)} of {len(bounds)}" if bounds else "-"
        by_benchmark.append(f"| {bench} | {len(exact)} | {fit} | {left} | {kept} |")
    lobo, cal, bounds = s["leave_one_benchmark_out"], s["calibration"], s["bounds"]
    return {
        "validation.table": "\n" + markdown_table(rows).strip() + "\n",
        "validation.by_benchmark": "\n" + "\n".join(by_benchmark) + "\n",
        "validation.runs": str(len(rows)),
        "validation.fit_median": f"{100 * cal['median_abs_error']:.1f}",
        "validation.fit_worst": f"{100 * cal['worst_abs_error']:.1f}",
        "validation.fit_rows": str(cal["rows"]),
        "validation.lobo_median": f"{100 * lobo['median_abs_error']:.1f}",
        "validation.lobo_worst": f"{100 * lobo['worst_abs_error']:.1f}",
        "validation.lobo_rows": str(lobo["rows"]),
        "validation.bounds_within": str(bounds["within"]),
        "validation.bounds_rows": str(bounds["rows"]),
        "validation.unexplained": f"{100 * worst:.1f}",
    }


def tiering_numbers():
    """`wus-sim validate --tiering`: MaxText's tiering rows simulated, as a table and summary."""
    import math

    from wus_sim.validation.tiering import simulate_tiering, tiering_summary

    results = simulate_tiering()
    lines = ["| row | model | slice | mesh | batch | tokens/s/device measured | simulated | error (fit) | "
             "error (leave-one-model-out) | MFU measured | simulated | measured band | error against it (fit, LOMO) | fits |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        where = r.topology + (f" x {r.slices}" if r.slices > 1 else "")
        mesh = r.mesh + (f", DCN {r.dcn_mesh}" if r.dcn_mesh else "")
        if r.status == "not expressible":
            lines.append(f"| {r.row} | {r.model} | {where} | {mesh} | {r.per_device_batch} | "
                         f"{r.measured_tokens_per_s_per_device:,.0f} | - | - | - | {100 * r.measured_mfu:.1f} % | - | - | - | "
                         "not expressible (expert axis) |")
            continue
        fits = "yes" if r.status == "ok" else "said not to"
        lines.append(f"| {r.row} | {r.model} | {where} | {mesh} | {r.per_device_batch} | "
                     f"{r.measured_tokens_per_s_per_device:,.0f} | {r.simulated_tokens_per_s_per_device:,.0f} | "
                     f"{100 * r.error:+.1f} % | {100 * r.lomo_error:+.1f} % | {100 * r.measured_mfu:.1f} % | "
                     f"{100 * r.simulated_mfu:.1f} % | {_band_s(r)} | {100 * r.band_error:+.1f} %, "
                     f"{100 * r.lomo_band_error:+.1f} % | {fits} |")
    s = tiering_summary(results)
    assert not math.isnan(s["median_abs_error"])
    lomo = s["leave_one_model_out"]
    return {"tiering.table": "\n" + "\n".join(lines) + "\n", "tiering.rows": str(s["rows"]),
            "tiering.median": f"{100 * s['median_abs_error']:.1f}", "tiering.worst": f"{100 * s['worst_abs_error']:.1f}",
            "tiering.within10": str(s["within_10pct"]), "tiering.infeasible": str(s["infeasible"]),
            "tiering.lomo_median": f"{100 * lomo['median_abs_error']:.1f}",
            "tiering.lomo_worst": f"{100 * lomo['worst_abs_error']:.1f}",
            "tiering.lomo_within10": str(lomo["within_10pct"]), "tiering.lomo_over20": str(lomo["rows"] - lomo["within_20pct"]),
            "tiering.band_worst": f"{100 * s['against_band']['worst_abs_error']:.1f}",
            "tiering.band_lomo_median": f"{100 * lomo['against_band']['median_abs_error']:.1f}",
            "tiering.band_lomo_worst": f"{100 * lomo['against_band']['worst_abs_error']:.1f}",
            "tiering.band_lomo_over20": str(lomo["against_band"]["rows"] - lomo["against_band"]["within_20pct"]),
            "tiering.row4_apart": f"{100 * results[3].band_width:.1f}",
            "tiering.others_apart": f"{100 * max(r.band_width for r in results if r.row != 4):.1f}",
            "tiering.row4_band": _band_s(results[3])}


def _band_s(r):
    lo, hi = r.measured_band_s
    return f"{lo:.3g}-{hi:.3g} s"


def calibration_numbers():
    """The shipped calibration's fitted values and their 95 % ranges."""
    from wus_sim.model.calibration import load_calibration

    cal = load_calibration()
    ranges = cal.provenance["param_ranges"]
    op = {stack: values["op_overhead_s"] for stack, values in cal.stacks.items()}
    out = {
        "cal.id": cal.id,
        "cal.mxu": f"{cal.params['matmul_peak_fraction']:.3f}",
        "cal.mxu_2025": f"{cal.stacks['maxtext-jax-2025']['matmul_peak_fraction']:.3f}",
        "cal.block": f"{cal.params['matmul_block']:.0f}",
        "cal.mxu_range": "{:.3f}-{:.3f}".format(*ranges["matmul_peak_fraction"]),
        "cal.elementwise_fwd": f"{cal.params['elementwise_fwd_bytes']:.2f} B",
        "cal.elementwise_bwd": f"{cal.params['elementwise_bwd_bytes']:.2f} B",
        "cal.elementwise_range": "{:.2f}-{:.2f} B".format(*ranges["elementwise_fwd_bytes"]),
    }
    for stack, name in (("tf1-tpuestimator-2019", "v06"), ("tf-jax-2020", "v07")):
        out[f"cal.op_{name}"] = f"{op[stack] * 1e6:.1f} us"
        out[f"cal.op_{name}_range"] = "{:.1f}-{:.1f} us".format(*(1e6 * v for v in ranges[f"op_overhead_s@{stack}"]))
    return out


PAPER_POINTS = {  # key -> (workload, slice, global batch): experiments/paper_speedup.yaml's batches
    "tfm_2048": ("transformer-big", "tpu-v3-2048", 2048),
    "tfm_128": ("transformer-big", "tpu-v3-128", 2048),
    "bert_2048": ("bert-large", "tpu-v3-2048", 2048),
    "resnet_2048": ("resnet50", "tpu-v3-2048", 4096),
    "resnet_1024": ("resnet50", "tpu-v3-1024", 4096),
    "resnet_32": ("resnet50", "tpu-v3-32", 4096),
}


def paper_numbers():
    """The headline: replicated over sharded step time of the paper experiment's points, with the
    calibration's 95 % band."""
    from wus_sim.experiments.records import simulate_point

    out = {}
    for key, (workload, topology, batch) in PAPER_POINTS.items():
        rows = {r["strategy"]: r for r in simulate_point({"workload": workload, "topology": topology,
                                                          "global_batch": batch, "strategy": "both"})}
        shd = rows["sharded"]
        out[f"paper.{key}"] = _x(rows["replicated"]["step_time_s"] / shd["step_time_s"])
        out[f"paper.{key}_band"] = f"{shd['speedup_low']:.2f}-{shd['speedup_high']:.2f}x"
    return out


LLM_V5P = "llama3-8b -t tpu-v5p-128 --megacore --remat layer --strategy all --per-replica-batch {b}"
LLM_V6E = "llama3-8b -t tpu-v6e-256 --remat layer --strategy all --per-replica-batch {b}"


def llm_numbers():
    """Llama-3-8B with AdamW: v5p-128 (megacore) and v6e-256, per-layer remat, all three strategies."""
    out = {}
    for chip, command in (("v5p", LLM_V5P), ("v6e", LLM_V6E)):
        for b in (1, 2):
            step = _step(command.format(b=b))
            strategies = step["strategies"]
            tag = f"llm.{chip}.b{b}"
            for name, short in (("replicated", "rep"), ("sharded", "shd"), ("fully-sharded", "fsd")):
                s = strategies[name]
                out[f"{tag}.{short}_peak"] = _gib(s["memory_bytes"]["peak"])
                out[f"{tag}.{short}_status"] = "fits" if s["status"] == "ok" else "does not fit"
                if s["status"] == "ok":
                    out[f"{tag}.{short}_step"] = _s(s["step_time_s"])
            for name, short in (("sharded", "shd"), ("fully-sharded", "fsd")):
                v = (step.get("speedup_if_replicated_fit") or {}).get(name)
                if v is not None:
                    out[f"{tag}.{short}_if_fit"] = _x(v)
            if step.get("fully_sharded_over_sharded") is not None:
                out[f"{tag}.fsd_over_shd"] = _x(step["fully_sharded_over_sharded"])
    return {k: v for k, v in out.items() if v}


MESH_V5P = "llama3-8b -t tpu-v5p-512 --megacore --global-batch 256 --remat none --mesh {mesh}"


def mesh_numbers():
    """Llama-3-8B on v5p-512 at 256 sequences: pure data parallelism with the sharded update, and
    fully sharded (`plan --search` ranks them first; docs/mesh.md shows its rows)."""
    out = {}
    for tag, mesh, strategy in (("shd", "data=256", "sharded"), ("fsd", "fsdp=256", "fully-sharded")):
        (s,) = _step(MESH_V5P.format(mesh=mesh) + f" --strategy {strategy}")["strategies"].values()
        out[f"mesh.v5p.{tag}_step"] = _s(s["step_time_s"])
        out[f"mesh.v5p.{tag}_peak"] = _gib(s["memory_bytes"]["peak"])
    return out


EXPERT_V5P = "mixtral-8x7b -t tpu-v5p-256 --megacore --global-batch 128 --remat none --mesh {mesh}"


def expert_numbers():
    """Mixtral-8x7B on v5p-256 at 128 sequences (docs/mesh.md, the expert axis): the mesh plan --search
    ranks first, the best without an expert axis, and fsdp=128 against fsdp=16,expert=8."""
    out = {}
    for tag, mesh, strategy in (("best", "data=8,fsdp=2,expert=8", "sharded"), ("tensor", "data=32,tensor=4", "sharded"),
                                ("fsdp", "fsdp=128", "fully-sharded"), ("ep", "fsdp=16,expert=8", "fully-sharded")):
        (s,) = _step(EXPERT_V5P.format(mesh=mesh) + f" --strategy {strategy}")["strategies"].values()
        b = s["breakdown"]
        out[f"expert.v5p.{tag}_step"] = _s(s["step_time_s"])
        out[f"expert.v5p.{tag}_peak"] = _gib(s["memory_bytes"]["peak"])
        out[f"expert.v5p.{tag}_compute"] = _ms(b["fwd_s"] + b["bwd_s"])
        out[f"expert.v5p.{tag}_a2a"] = _ms(b["expert_comm_s"])
        out[f"expert.v5p.{tag}_tensor"] = _ms(b["tensor_comm_s"])
        out[f"expert.v5p.{tag}_fsdp"] = _ms(b["fsdp_comm_s"])
    return out


CONTEXT_V5P = "{path} -t tpu-v5p-128 --megacore --per-replica-batch 1 --mesh {mesh} --remat {remat}"


def context_numbers():
    """Llama-3-8B at 131,072 tokens on v5p-128, one sequence a data-parallel group (docs/mesh.md, the
    context axis): fsdp=64 with and without remat against context=8 without."""
    import tempfile

    from wus_sim.model.importers.importers import import_workload

    out = {}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "llama3-8b-128k.yaml"
        import_workload(str(ROOT / "tests" / "data" / "hf_configs" / "llama3-8b.json"), name="llama3-8b",
                        out=str(path), sequence_length=131072)
        for tag, mesh, remat in (("fsdp_none", "fsdp=64", "none"), ("fsdp_full", "fsdp=64", "full"),
                                 ("c8_full", "fsdp=8,context=8", "full"), ("c8_none", "fsdp=8,context=8", "none")):
            (s,) = _step(CONTEXT_V5P.format(path=path, mesh=mesh, remat=remat))["strategies"].values()
            b = s["breakdown"]
            out[f"context.v5p.{tag}_peak"] = _gib(s["memory_bytes"]["peak"])
            if s["status"] != "ok":
                continue
            out[f"context.v5p.{tag}_step"] = _s(s["step_time_s"])
            out[f"context.v5p.{tag}_tps"] = f"{s['tokens_per_s_per_device']:,.0f}"
            out[f"context.v5p.{tag}_mfu"] = _pct(s["mfu"])
            out[f"context.v5p.{tag}_kv"] = _ms(b["context_comm_s"])
    return out


PIPE_GPT3 = "gpt3-175b -t tpu-v5p-2048 --megacore --mesh fsdp=-1,tensor=8 --dcn-mesh {dcn}"


def pipeline_numbers():
    """GPT-3 175B on two v5p-2048 slices (docs/mesh.md, the pipeline axis): 2 stages across the slices
    against data=2 and fsdp=2 across them, each at the default global batch (256 sequences)."""
    out = {}
    for tag, dcn in (("pipe", "pipeline=2"), ("data", "data=2 --strategy sharded"), ("fsdp", "fsdp=2")):
        doc = _step(PIPE_GPT3.format(dcn=dcn))
        (s,) = doc["strategies"].values()
        b = s["breakdown"]
        out[f"pipe.gpt3.{tag}_step"] = _s(s["step_time_s"])
        out[f"pipe.gpt3.{tag}_peak"] = _gib(s["memory_bytes"]["peak"])
        out[f"pipe.gpt3.{tag}_exposed"] = _ms(b["exposed_comm_s"])
        if tag == "pipe":
            out["pipe.gpt3.bubble"] = _ms(b["pipeline_bubble_s"])
            out["pipe.gpt3.comm"] = _ms(b["pipeline_comm_s"])
            out["pipe.gpt3.permutes"] = str(doc["mesh"]["comm"]["pipeline"]["collectives"] - 1)
    return out


LLAMA_V5P_FSDP = ("llama3-8b -t tpu-v5p-512 --megacore --remat layer --per-replica-batch 2 --strategy fully-sharded"
                  " --gather-prefetch {k}")
LLAMA_V6E_FSDP = "llama3-8b -t tpu-v6e-256 --remat layer --per-replica-batch 1 --strategy fully-sharded"


def model_error_numbers():
    """docs/model-error.md: a step on each software stack, BERT-large's memory under each
    activation model, the fully-sharded prefetch sweep and its network sensitivity."""
    out = {}
    for tag, stack in (("2020", "tf-jax-2020"), ("2019", "tf1-tpuestimator-2019")):
        step = _step(f"resnet50 --topology tpu-v3-2048 --software-stack {stack}")
        out[f"me.stack.{tag}"] = f"{step['strategies']['replicated']['step_time_s'] * 1e3:.2f} ms"
    for model in ("xla", "unfused"):
        step = _step(f"bert-large --topology tpu-v3-32 --per-replica-batch 24 --strategy sharded "
                     f"--activation-model {model}")
        memory = step["strategies"]["sharded"]["memory_bytes"]
        out[f"me.bert.{model}_act"] = _gib(memory["activations"])
        out[f"me.bert.{model}_peak"] = _gib(memory["peak"])
    default = _step(LLAMA_V5P_FSDP.replace(" --gather-prefetch {k}", ""))
    k_default = default["parameters"]["gather_prefetch"]  # the layer-ahead count the step resolved
    cols = [(str(k), _step(LLAMA_V5P_FSDP.format(k=k))["strategies"]["fully-sharded"])
            for k in sorted({1, 2, 4, 8, 16, 32} - {k_default})]
    cols.append((f"{k_default} (default)", default["strategies"]["fully-sharded"]))
    cols.sort(key=lambda c: int(c[0].split()[0]))
    peak = {k: c["memory_bytes"]["peak"] for k, c in cols}
    out["me.prefetch.extra"] = _gib(peak[f"{k_default} (default)"] - peak["1"])
    out["me.prefetch.table"] = ("\n| gather prefetch | " + " | ".join(k for k, _ in cols) + " |\n"
                                + "|---|" + "---|" * len(cols) + "\n"
                                + "| step time, s | " + " | ".join(f"{s['step_time_s']:.3f}" for _, s in cols) + " |\n"
                                + "| peak, GiB | " + " | ".join(f"{s['memory_bytes']['peak'] / 2**30:.2f}" for _, s in cols)
                                + " |\n")
    times = {}
    for tag, extra in (("layer", ""), ("layer_slow", " --link-GBps 45"), ("bucket", " --gather-prefetch 1"),
                       ("bucket_slow", " --gather-prefetch 1 --link-GBps 45")):
        times[tag] = _step(LLAMA_V6E_FSDP + extra)["strategies"]["fully-sharded"]["step_time_s"]
        out[f"me.v6e.{tag}"] = _s(times[tag])
    for tag in ("layer", "bucket"):
        out[f"me.v6e.{tag}_growth"] = f"+{100 * (times[tag + '_slow'] / times[tag] - 1):.1f} %"
    return out


def step_numbers():
    """Examples of the model pages: BERT-large with per-layer remat; Transformer-big fully sharded."""
    out = {}
    bert = _step("bert-large --topology tpu-v3-32 --per-replica-batch 16 --remat layer")["strategies"]
    out["bert.remat.rep_step"] = _ms(bert["replicated"]["step_time_s"])
    out["bert.remat.shd_step"] = _ms(bert["sharded"]["step_time_s"])
    out["bert.remat.speedup"] = f"{bert['replicated']['step_time_s'] / bert['sharded']['step_time_s']:.3f}x"
    out["bert.remat.shd_peak"] = _gib(bert["sharded"]["memory_bytes"]["peak"])
    plain = _step("bert-large --topology tpu-v3-32 --per-replica-batch 16")["strategies"]
    out["bert.plain.shd_peak"] = _gib(plain["sharded"]["memory_bytes"]["peak"])
    tfm = _step("transformer-big --topology tpu-v3-2048 --optimizer adam --strategy all")["strategies"]
    for name, short in (("replicated", "rep"), ("sharded", "shd"), ("fully-sharded", "fsd")):
        out[f"tfm.{short}_step"] = _ms(tfm[name]["step_time_s"])
        out[f"tfm.{short}_peak"] = _gib(tfm[name]["memory_bytes"]["peak"])
    return out


PLAN_COMMAND = "plan transformer-big --topology tpu-v3-2048 --optimizer adam"


def plan_numbers():
    """The plan example: what `wus-sim plan` prints, whole."""
    return {"plan.transformer": f"\n```text\n$ wus-sim {PLAN_COMMAND}\n{_cli(PLAN_COMMAND).rstrip()}\n```\n"}


def bench_numbers():
    """Speed: the committed output of `wus-sim bench` (its last line names the machine), quoted
    as it is; never compared with a live run."""
    text = BENCH_FILE.read_text(encoding="utf-8").rstrip()
    # each issue-34 case's median wall time, as the table prints it ("-" if the run lacks it)
    walls = {cells[1].strip(): cells[4].strip() for cells in
             (line.split("|") for line in text.splitlines() if line.startswith("| ")) if len(cells) > 5}
    cluster = BENCH_CLUSTER_FILE.read_text(encoding="utf-8").rstrip() if BENCH_CLUSTER_FILE.is_file() else "-"
    searches = BENCH_SEARCH_FILE.read_text(encoding="utf-8").rstrip() if BENCH_SEARCH_FILE.is_file() else "-"
    return {"bench.table": f"\n```text\n$ wus-sim bench\n{text}\n```\n",
            "bench.cluster_table": f"\n```text\n$ wus-sim {BENCH_CLUSTER_COMMAND}\n{cluster}\n```\n",
            "bench.search_table": f"\n```text\n$ wus-sim {BENCH_SEARCH_COMMAND}\n{searches}\n```\n",
            "bench.machine": text.splitlines()[-1].strip(),
            **{key: walls.get(case, "-") for key, case in BENCH_QUOTED.items()}}


BENCH_QUOTED = {
    "bench.sweep_100k": "what-if sweep: the whole 100,000-point grid, --jobs 2 (whole command)",
    "bench.failed_cable": "step: transformer-big adam tpu-v3-2048, 1 failed cable, both strategies",
    "bench.batch_norm": "step: resnet50 lars tpu-v3-2048, batch norm over 8 cores, both strategies",
    "bench.torus256": "2d all-reduce 64MiB torus:256x256",
    "bench.collective_cmd": "wus-sim collective torus:32x32 2d all-reduce 64MiB (whole command)",
    "bench.version": "wus-sim --version (whole command)",
}
"""Bench cases whose median wall time the README's Speed section quotes, by span key."""


def api_numbers():
    """The API reference: one mkdocstrings entry per public name of ``wus_sim`` (its ``__all__``),
    where the name is defined, so a new public name cannot be missing from the page."""
    import importlib

    import wus_sim

    lines = []
    for name in wus_sim.__all__:
        obj = getattr(wus_sim, name)
        module = getattr(obj, "__module__", None) if not isinstance(obj, (tuple, list, dict)) else None
        target = wus_sim._LAZY.get(name, "")
        if ":" in target:  # a public name bound to another function (wus_sim.inputs.lazy_names): that one
            where = "wus_sim." + target.replace(":", ".")
        else:
            if module is None or not hasattr(importlib.import_module(module), name):
                module = f"wus_sim.{target}" if target else "wus_sim"
            where = f"{module}.{name}"
        lines.append(f"::: {where}\n    options:\n      heading_level: 3\n")
    return {"api.reference": "\n" + "\n".join(lines)}


SOURCES = {"validation": validation_numbers, "cal": calibration_numbers, "paper": paper_numbers,
           "llm": llm_numbers, "mesh": mesh_numbers, "me": model_error_numbers, "bert": step_numbers, "tfm": step_numbers, "plan": plan_numbers,
           "bench": bench_numbers, "api": api_numbers, "tiering": tiering_numbers, "expert": expert_numbers,
           "context": context_numbers, "pipe": pipeline_numbers, **EXAMPLE_SOURCES}
"""Key prefix -> the function that computes every key of that prefix (the pages' worked examples:
tests/tools/docs_examples.py)."""


_COMPUTED = {}
"""Each source's values, once per process (the tests ask for them several times; the code
does not change within a run)."""


def compute(keys):
    """``{key: text}`` for *keys*, running each source they need once per process."""
    values = {}
    for fn in dict.fromkeys(SOURCES[k.split(".")[0]] for k in keys if k.split(".")[0] in SOURCES):
        if fn not in _COMPUTED:
            _COMPUTED[fn] = fn()
        values.update(_COMPUTED[fn])
    unknown = sorted(k for k in keys if k not in values)
    if unknown:
        raise KeyError(f"no generator writes {', '.join(unknown)} (tests/tools/regenerate_docs_numbers.py SOURCES)")
    return values


def spans(files=None):
    """``[(path, key, text)]`` of every marked span of *files* (default :func:`pages`)."""
    return [(path, m.group(1), m.group(2)) for path in (files or pages())
            for m in SPAN.finditer(path.read_text(encoding="utf-8"))]


def stale(files=None):
    """``[(path, key, committed, today)]`` of the spans whose text is not what the code prints."""
    found = spans(files)
    values = compute({key for _, key, _ in found})
    return [(path, key, text, values[key]) for path, key, text in found if text != values[key]]


def rewrite(files=None):
    """Rewrite every marked span of *files* in place; return the paths changed."""
    files = files or pages()
    values = compute({key for _, key, _ in spans(files)})
    changed = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        new = SPAN.sub(lambda m: f"<!-- num:{m.group(1)} -->{values[m.group(1)]}<!-- /num -->", text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def rerun_bench():
    """`wus-sim bench` on this machine into :data:`BENCH_FILE` (several minutes)."""
    BENCH_FILE.parent.mkdir(parents=True, exist_ok=True)
    BENCH_FILE.write_text(_cli("bench"), encoding="utf-8")
    BENCH_CLUSTER_FILE.write_text(_cli(BENCH_CLUSTER_COMMAND), encoding="utf-8")
    BENCH_SEARCH_FILE.write_text(_cli(BENCH_SEARCH_COMMAND), encoding="utf-8")
    _COMPUTED.pop(bench_numbers, None)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="list stale spans; exit 1 if any, change nothing")
    ap.add_argument("--bench", action="store_true", help="rerun `wus-sim bench` into docs/data/bench.txt first")
    args = ap.parse_args(argv)
    if args.bench:
        rerun_bench()
    if args.check:
        bad = stale()
        for path, key, committed, today in bad:
            print(f"{path.relative_to(ROOT)}: {key}: committed {committed.strip()[:60]!r}, "
                  f"the code prints {today.strip()[:60]!r}")
        return 1 if bad else 0
    for path in rewrite():
        print(f"rewrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
