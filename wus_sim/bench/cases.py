"""The benchmark cases of ``wus-sim bench``, registered in :data:`wus_sim.bench.CASES` in the
order the table lists them (the builders and the loop are :mod:`wus_sim.bench`; what each case
means is in docs/speed.md)."""

import os

from .builders import (cli_case, cluster_experiment_case, collective_case, collective_problem, experiment_case,
                       interpreter_case, mesh_case, point_case, search_case, register, step_case)
from ..inputs.shipped import shipped_dir
from ..inputs.units import MiB

__all__ = ["WHATIF_SWEEP", "WHATIF_SAMPLE"]


WHATIF_SWEEP = {
    "name": "bench_whatif_sweep",
    "description": "The issue-34 what-if grid: 5 workloads x 4 TPU-v3 slices x 5 optimizers x 20 link "
                   "bandwidths x 50 per-replica batches = 100,000 points, both strategies.",
    "workloads": ["resnet50", "transformer-big", "bert-large", "gnmt", "ssd-resnet34"],
    "topologies": ["tpu-v3-32", "tpu-v3-128", "tpu-v3-512", "tpu-v3-2048"],
    "optimizers": ["adam", "sgd", "momentum", "lars", "lamb"],
    "strategies": ["replicated", "sharded"],
    "sweep": {"link_GBps": list(range(10, 201, 10)), "per_replica_batch": list(range(1, 51))},
}
"""The what-if sweep of issue 34 (100,000 points); the bench runs a prefix of it (``--limit``)."""


WHATIF_SAMPLE = {**WHATIF_SWEEP, "name": "bench_whatif_sample",
                 "description": "1,000 points spread over the issue-34 grid: its 100 workload x slice x optimizer "
                                "combinations, each at 2 link bandwidths x 5 batches, both strategies.",
                 "sweep": {"link_GBps": [10, 200], "per_replica_batch": [1, 8, 16, 32, 50]}}
"""A sample of :data:`WHATIF_SWEEP` with every one of its workload, slice and optimizer
combinations (its first 1,000 points are all one of them): 100 times its time per point is the
whole grid's."""


def _sweep_file(doc, stem):
    """*doc* as an experiment file in the temporary directory (the same file each time), its path."""
    import tempfile

    import yaml

    from ..inputs.writes import write_atomic

    path = os.path.join(tempfile.gettempdir(), f"{stem}.yaml")
    # atomic: two bench runs at once never read each other's half-written file
    write_atomic(path, yaml.safe_dump({**doc, "plots": []}, sort_keys=False), what="bench sweep file")
    return path


def _whatif_sweep_file():
    """:data:`WHATIF_SWEEP` as an experiment file, its path."""
    return _sweep_file(WHATIF_SWEEP, "wus-bench-whatif-sweep")


def _whatif_sample_file():
    """:data:`WHATIF_SAMPLE` as an experiment file, its path."""
    return _sweep_file(WHATIF_SAMPLE, "wus-bench-whatif-sample")


# ======================================================================= cases
_S = 64 * MiB
for _dims in ("32x32", "64x64", "128x128", "256x256"):
    register(collective_case(f"2d all-reduce 64MiB torus:{_dims}", f"torus:{_dims}", "all-reduce", "2d", _S))
register(collective_case("2d all-reduce 64MiB tpu-v3-2048", "tpu-v3-2048", "all-reduce", "2d", _S))
register(collective_case("2d all-reduce 64MiB torus:32x32 (SimPy reference)", "torus:32x32", "all-reduce",
                         "2d", _S, engine="simpy"))
register(collective_case("halving-doubling all-reduce 64MiB torus:32x32", "torus:32x32", "all-reduce",
                         "halving-doubling", _S, engine="simpy"))
register(collective_case("halving-doubling all-reduce 64MiB torus:32x32 (window engine)", "torus:32x32",
                         "all-reduce", "halving-doubling", _S, engine="window"))
register(collective_case("ring all-reduce 64MiB torus:32x32", "torus:32x32", "all-reduce", "ring", _S))
register(collective_case("2d all-reduce 64MiB tpu-v3-2048 (api, engine auto)", "tpu-v3-2048", "all-reduce",
                         "2d", _S, engine="auto"))
# issue 46: the all-to-all on a 1024-chip pod, its default (2d-split) through the api (its passes
# run in engines/fast_alltoall.py, which the fast engine's direct entry does not reach)
register(collective_case("2d-split all-to-all 64MiB torus:32x32 (api, engine auto)", "torus:32x32", "all-to-all",
                         "2d-split", _S, engine="auto"))
# issue 34: start-up of short commands (a fresh interpreter each run: Python, numpy, wus-sim), beside
# the interpreter's own floor, which no command goes below (what is wus-sim's is the difference)
register(interpreter_case("python -S -c pass (the interpreter alone)", ["-S"]))
register(interpreter_case("python -c pass (the interpreter and its site: the floor of every command)", []))
register(cli_case("wus-sim --version (whole command)", ["--version"]))
register(cli_case("wus-sim collective torus:32x32 2d all-reduce 64MiB (whole command)",
                  ["collective", "-t", "torus:32x32", "--op", "all-reduce", "--algorithm", "2d", "--size", "64MiB",
                   "--link-GBps", "100", "--hop-latency-us", "1", "--json"],
                  problem=collective_problem("torus:32x32", "all-reduce", "2d", _S) + " cut-through"))
register(cli_case("wus-sim collective tpu-v3-2048 2d all-reduce 64MiB (whole command)",
                  ["collective", "-t", "tpu-v3-2048", "--op", "all-reduce", "--algorithm", "2d", "--size", "64MiB",
                   "--json"],
                  problem=collective_problem("tpu-v3-2048", "all-reduce", "2d", _S)))
# issue 10: one failed cable (2 links): the detours share links, so an event engine runs it
# (engine auto: the window engine; SimPy as the reference)
register(collective_case("2d all-reduce 64MiB tpu-v3-2048, 1 failed cable (api, engine auto)", "tpu-v3-2048",
                         "all-reduce", "2d", _S, engine="auto", faults={"failed_links": 1, "seed": 0}))
register(collective_case("2d all-reduce 64MiB tpu-v3-2048, 1 failed cable (SimPy reference)", "tpu-v3-2048",
                         "all-reduce", "2d", _S, engine="simpy", faults={"failed_links": 1, "seed": 0}))
# issue 34: the same contended schedules under cut-through, the commands' default routing: the
# window engine, not SimPy, runs them (SimPy remains the reference: same problem, same time)
register(collective_case("2d all-reduce 64MiB tpu-v3-2048, 1 failed cable, cut-through (api, engine auto)",
                         "tpu-v3-2048", "all-reduce", "2d", _S, engine="auto", faults={"failed_links": 1, "seed": 0},
                         routing="cut-through"))
register(collective_case("halving-doubling all-reduce 64MiB torus:32x32, cut-through (api, engine auto)",
                         "torus:32x32", "all-reduce", "halving-doubling", _S, engine="auto", routing="cut-through"))
register(collective_case("halving-doubling all-reduce 64MiB torus:32x32, cut-through (SimPy reference)",
                         "torus:32x32", "all-reduce", "halving-doubling", _S, engine="simpy", routing="cut-through"))
# the reduced set run by tests: small, one problem on both engines
register(collective_case("quick: 2d all-reduce 1MiB torus:8x8", "torus:8x8", "all-reduce", "2d", MiB,
                         quick=True, full=False))
register(collective_case("quick: 2d all-reduce 1MiB torus:8x8 (SimPy)", "torus:8x8", "all-reduce", "2d", MiB,
                         engine="simpy", quick=True, full=False))
register(collective_case("quick: ring all-reduce 1MiB torus:4x4", "torus:4x4", "all-reduce", "ring", MiB,
                         quick=True, full=False))
register(collective_case("quick: 2d all-reduce 1MiB torus:8x8, 1 failed cable", "torus:8x8", "all-reduce", "2d", MiB,
                         engine="auto", quick=True, full=False, faults={"failed_links": "27+x"}))
register(collective_case("quick: 2d all-reduce 1MiB torus:8x8, 1 failed cable (SimPy)", "torus:8x8", "all-reduce",
                         "2d", MiB, engine="simpy", quick=True, full=False, faults={"failed_links": "27+x"}))
register(collective_case("quick: 2d all-reduce 1MiB torus:8x8, 1 failed cable, cut-through", "torus:8x8", "all-reduce",
                         "2d", MiB, engine="auto", quick=True, full=False, faults={"failed_links": "27+x"},
                         routing="cut-through"))
register(collective_case("quick: 2d all-reduce 1MiB torus:8x8, 1 failed cable, cut-through (SimPy)", "torus:8x8",
                         "all-reduce", "2d", MiB, engine="simpy", quick=True, full=False,
                         faults={"failed_links": "27+x"}, routing="cut-through"))
# issue 4: what-if sweeps run thousands of points
_EXPERIMENTS = str(shipped_dir("experiments"))
register(step_case("step: transformer-big adam tpu-v3-2048, both strategies", "transformer-big", "tpu-v3-2048",
                   "adam"))
# issue 24: a step point with its bands and validated range stays under 0.2 s
register(point_case("step point with bands: transformer-big adam tpu-v3-2048, both strategies",
                    {"workload": "transformer-big", "topology": "tpu-v3-2048", "optimizer": "adam"}, quick=True))
# issue 10: one point of each what-if on a 2048-replica slice in under 1 s
register(step_case("step: transformer-big adam tpu-v3-2048, fully-sharded (what-if)", "transformer-big",
                   "tpu-v3-2048", "adam", strategies=("fully-sharded",)))
register(step_case("step: transformer-big adam 2 slices of tpu-v3-2048 over the DCN, both strategies",
                   "transformer-big", "tpu-v3-2048", "adam", slices=2))
register(step_case("step: transformer-big adam tpu-v3-2048, 1 failed cable, both strategies", "transformer-big",
                   "tpu-v3-2048", "adam", faults={"failed_links": 1, "seed": 0}))
# issue 34: the detours' contended schedules run on the window engine under both routings (the
# default cut-through above, and store-and-forward here); SimPy stays the reference
register(step_case("step: transformer-big adam tpu-v3-2048, 1 failed cable, store-and-forward", "transformer-big",
                   "tpu-v3-2048", "adam", faults={"failed_links": 1, "seed": 0},
                   options={"routing": "store-and-forward"}))
register(step_case("step: resnet50 lars tpu-v3-2048, batch norm over 8 cores, both strategies", "resnet50",
                   "tpu-v3-2048", options={"bn_group_replicas": 8}))
# issue 32: one GPT-3 175B point on 6,144 v5p chips (six v5p-2048 slices over the DCN), fsdp x
# tensor in each slice, data across them
register(mesh_case("mesh step: gpt3-175b adam, 6 slices of tpu-v5p-2048 (6,144 chips), fsdp=128,tensor=8",
                   "gpt3-175b", "tpu-v5p-2048", "adam", mesh="fsdp=128,tensor=8", dcn_mesh="data=6", megacore=True,
                   global_batch=1536, options={"remat": "full", "quantization": "int8"}))
# issue 47: a mesh search tells the truth in bounded time and memory: GPT-3 on v5p-2048 (its 2,048
# TensorCores, as the command counts them with --no-megacore: the figure, taken before a v5p
# chip became one device by default; search_case's megacore=False says so; and its 1,024 chips, as
# the command counts them now) <= 5 s and 300 MB; the largest v5p slice (the whole pod,
# tpu-v5p-17920: 8,960 chips, each a device as JAX counts it) <= 15 s. Minutes in all, so opt-in
# (--case 'plan --search'), committed apart in docs/data/bench-search.txt; --jobs 2 as plan --search
# runs on this 2-CPU machine by default, --jobs 1 for the memory (each worker's bound)
for _jobs in (1, 2):
    register(search_case(f"plan --search: gpt3-175b on tpu-v5p-2048 (2,048 TensorCores), --jobs {_jobs}", "gpt3-175b",
                         "tpu-v5p-2048", jobs=_jobs, full=False, opt_in=True))
    register(search_case(f"plan --search: gpt3-175b on tpu-v5p-2048 (1,024 chips), --jobs {_jobs}", "gpt3-175b",
                         "tpu-v5p-2048", megacore=True, jobs=_jobs, full=False, opt_in=True))
register(search_case("plan --search: gpt3-175b on tpu-v5p-17920 (the whole v5p pod, 8,960 chips), --jobs 2",
                     "gpt3-175b", "tpu-v5p-17920", megacore=True, jobs=2, full=False, opt_in=True, max_runs=1))
register(search_case("plan --search: gpt3-175b on tpu-v5p-3072 (3,072 TensorCores), --jobs 2", "gpt3-175b",
                     "tpu-v5p-3072", jobs=2, full=False, opt_in=True, max_runs=3))
# issue 46: a mixture of experts' search adds its expert sizes (those dividing its 8 experts): 992
# candidates on v5p-256's 128 chips, 368 without them
register(search_case("plan --search: mixtral-8x7b on tpu-v5p-256 (128 chips, expert meshes too), --jobs 2",
                     "mixtral-8x7b", "tpu-v5p-256", megacore=True, jobs=2, full=False, opt_in=True, max_runs=3))
register(experiment_case("wus-sim run experiments/paper_speedup.yaml --jobs 2 (whole command)",
                         os.path.join(_EXPERIMENTS, "paper_speedup.yaml")))
register(experiment_case("what-if sweep: first 1,000 of the 100,000-point grid, --jobs 2 (whole command)",
                         _whatif_sweep_file, extra=("--limit", "1000", "--no-plots")))
register(experiment_case("what-if sweep: 1,000 points over all 100 combinations of the grid, --jobs 2 (whole command)",
                         _whatif_sample_file, extra=("--no-plots",)))
# issue 34: the whole grid (100,000 points, 200,000 rows, the journal and every results file
# written), a minute a run: timed three times whatever --repeat says
register(experiment_case("what-if sweep: the whole 100,000-point grid, --jobs 2 (whole command)",
                         _whatif_sweep_file, extra=("--no-plots",), max_runs=3))
# issue 45: the same whole grid on a Dask cluster of two worker processes (and its scheduler), all on
# 127.0.0.1, beside --jobs 2 above: opt-in (--case sweep-cluster), since it starts processes of its own
register(cluster_experiment_case("sweep-cluster: the whole 100,000-point what-if grid, a Dask scheduler + 2 workers "
                                 "on 127.0.0.1 (whole command)", _whatif_sweep_file, workers=2, extra=("--no-plots",),
                                 max_runs=3))
register(cluster_experiment_case("sweep-cluster: first 1,000 of the 100,000-point grid, a Dask scheduler + 2 workers "
                                 "on 127.0.0.1 (whole command)", _whatif_sweep_file, workers=2,
                                 extra=("--limit", "1000", "--no-plots")))
register(step_case("quick: step resnet50 tpu-v3-32", "resnet50", "tpu-v3-32", quick=True, full=False))
register(step_case("quick: step resnet50 tpu-v3-32, batch norm over 8 cores", "resnet50", "tpu-v3-32",
                   quick=True, full=False, options={"bn_group_replicas": 8}))
register(step_case("quick: step resnet50 tpu-v3-32, 1 failed cable", "resnet50", "tpu-v3-32", quick=True,
                   full=False, faults={"failed_links": 1, "seed": 0}))
