"""Regenerate the measured MLPerf v0.6 TPU-v3 step times from Google's public logs.

Not runtime code and not shipped (it lives outside the package): wus-sim only reads
the CSV this script writes, ``wus_sim/data/validation/mlperf_v06_tpu_v3.csv``
(columns, units, method and caveats: ``wus_sim/data/validation/README.md``).
Run it from the repository root with a clone (bare or not) of
github.com/mlcommons/training_results_v0.6 that contains the pinned commit::

    python tests/tools/regenerate_mlperf_v06.py [--repo PATH] [--check]

``--check`` writes nothing and exits 1 if the shipped CSV differs from what would be
written. Everything is read with ``git show PINNED:path``, so a newer checkout gives
the same table.

What comes from where (paths in that repository, at PINNED):

* timestamps: ``Google/results/tpu-v3-*/<bench>/result_*.txt`` (":::MLL <unix time>
  <key>: {json}" lines); global batch from the logs' ``global_batch_size``.
* replicas, spatial partitioning, iterations per device loop, batch-norm groups,
  bfloat16 gradient all-reduce: the flags in ``Google/benchmarks/<bench>/<slice>/run_and_time.sh``
  (defaults they leave unset are checked in the implementation code below).
* what one timed block contains (train loop, then eval on the TPU, in one device
  program): the runner code in ``Google/benchmarks/<bench>/implementations/``;
  the facts this table relies on are checked by :func:`require` so that a different
  commit that broke them fails instead of giving a silently wrong table.
"""

import json
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

from csv_tool import generator_main, render_csv

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "wus_sim" / "data" / "validation" / "mlperf_v06_tpu_v3.csv"
DEFAULT_SNAPSHOT = Path("/work/.mirror/mlcommons+training_results_v0.6/repo")
UPSTREAM = "github.com/mlcommons/training_results_v0.6"
PINNED = "f312518c2d6107eec983750eed23950f1f0c8a0e"

COLUMNS = [
    "benchmark", "workload", "topology", "cores", "replicas", "spatial_ways",
    "global_batch", "per_replica_batch", "optimizer", "precision", "grad_allreduce_dtype",
    "bn_group_cores", "steps_per_loop", "eval_on_device", "update", "update_source",
    "measured_step_s", "step_s_min", "step_s_max", "runs", "kind", "method", "sources",
]
BENCHMARKS = ["resnet", "ssd", "mask", "transformer", "gnmt"]
SLICES = ["tpu-v3-32", "tpu-v3-128", "tpu-v3-256", "tpu-v3-512", "tpu-v3-1024", "tpu-v3-2048"]

PRECISION = "bf16 activations / fp32 weights"
# An image (or sentence) of inference is taken as 1/3 of a training one (forward only,
# against forward + two backward passes) in the eval-share estimates below.
INFER_PER_TRAIN = 1 / 3
TRANSFORMER_PACKED_LEN = 256     # tokens per packed sequence (translate_ende_wmt32k_packed)
SSD_LOOP_IMAGES_AT_32 = 20000    # SSD runner: eval after loop i when cumulative EVAL_STEPS // 20000 - 1 == i

XU = "Xu et al. 2020 (arXiv 2004.13336)"
KUMAR = "Kumar et al. 2019 (arXiv 1909.09756)"


# ------------------------------------------------------------------ git access
class Snapshot:
    """Files of the results repository at the pinned commit, read with ``git show``."""

    def __init__(self, repo, commit=PINNED):
        self.repo = Path(repo)
        self.commit = commit
        probe = self._git("cat-file", "-t", commit, check=False)
        if probe.returncode != 0 or probe.stdout.strip() != "commit":
            raise SystemExit(f"{repo}: commit {commit} of {UPSTREAM} not found "
                             f"(pass --repo with a clone that has it)")
        head = self._git("rev-parse", "HEAD", check=False).stdout.strip()
        if head and head != commit:
            print(f"note: {repo} HEAD is {head}; reading the pinned commit {commit}", file=sys.stderr)
        self._cache = {}

    def _git(self, *args, check=True):
        return subprocess.run(["git", "-C", str(self.repo), *args], capture_output=True,
                              text=True, check=check)

    def ls(self, prefix):
        out = self._git("ls-tree", "-r", "--name-only", self.commit, prefix).stdout
        return sorted(out.split())

    def show(self, path):
        if path not in self._cache:
            self._cache[path] = self._git("show", f"{self.commit}:{path}").stdout
        return self._cache[path]


def require(snap, path, pattern, what):
    """Fail unless *pattern* (a regex) occurs in *path*: a code fact this table relies on."""
    if not re.search(pattern, snap.show(path)):
        raise SystemExit(f"{path}: expected {what} (pattern {pattern!r}) at {snap.commit}")


# ------------------------------------------------------------------- parsing
MLL = re.compile(r"^:::MLL (\S+) (\w+): (\{.*\})\s*$")


def parse_log(text):
    """[(unix time s, key, value, metadata)] in file order."""
    events = []
    for line in text.splitlines():
        m = MLL.match(line)
        if m:
            body = json.loads(m[3])
            events.append((float(m[1]), m[2], body.get("value"), body.get("metadata", {})))
    return events


def parse_flags(script):
    """``--key=value`` tokens of run_and_time.sh -> {key: [values in order]}."""
    flags = {}
    for token in script.replace("\\\n", " ").split():
        if token.startswith("--") and "=" in token:
            key, value = token[2:].split("=", 1)
            flags.setdefault(key, []).append(value)
    return flags


def flag(flags, key, default=None):
    values = flags.get(key)
    if not values:
        if default is None:
            raise SystemExit(f"run_and_time.sh has no --{key}")
        return default
    if len(set(values)) != 1:
        raise SystemExit(f"--{key} given with different values {values}")
    return values[0]


def parse_hparams(text):
    return dict(item.split("=", 1) for item in text.split(",") if item)


def only(values, what):
    values = set(values)
    if len(values) != 1:
        raise SystemExit(f"{what}: expected one value across the runs, got {sorted(values)}")
    return values.pop()


def fmt(x):
    return f"{x:.6f}"


# ------------------------------------------------------ per-benchmark configs
def impl_dir(bench, topo):
    return f"Google/benchmarks/{bench}/implementations/{topo}-{bench}"


def cfg_resnet(snap, topo, flags):
    code = f"{impl_dir('resnet', topo)}/resnet"
    main, runner = f"{code}/resnet_main.py", f"{code}/train_and_eval_runner.py"
    require(snap, main, r"'precision', default='bfloat16'", "bfloat16 as the precision default")
    require(snap, main, r"CrossShardOptimizer", "the optimizer wrapped in CrossShardOptimizer")
    require(snap, runner, r"with tf\.control_dependencies\(self\.train_loop\(\)\):\s*return eval_loop\(\)",
            "one device program: train loop, then eval loop")
    cores = int(flag(flags, "num_cores"))
    ipl = int(flag(flags, "iterations_per_loop"))
    if int(flag(flags, "steps_per_eval")) != ipl:
        raise SystemExit(f"resnet {topo}: steps_per_eval != iterations_per_loop")
    group = int(flag(flags, "distributed_group_size", "1"))
    eval_batch = int(flag(flags, "eval_batch_size"))
    eval_images = math.ceil(50000 / eval_batch) * eval_batch        # num_eval_images default 50000
    require(snap, main, r"'num_eval_images', default=50000", "50,000 eval images")
    return dict(
        cores=cores, replicas=cores, spatial_ways=1, train_batch=int(flag(flags, "train_batch_size")),
        optimizer="lars" if flag(flags, "enable_lars") == "True" else "momentum",
        grad_dtype="fp32", bn_group_cores=group if group > 1 else None, steps_per_loop=ipl,
        marker="eval_accuracy", runner_file="train_and_eval_runner.py",
        eval_images=eval_images, opt_file=main, code=[main, runner])


def cfg_ssd(snap, topo, flags):
    code = f"{impl_dir('ssd', topo)}/ssd"
    runner, consts, model = (f"{code}/train_and_eval_low_level_runner.py",
                             f"{code}/ssd_constants.py", f"{code}/ssd_model.py")
    require(snap, runner, r"steps // 20000 - 1", "evals placed after device loops at cumulative EVAL_STEPS // 20000 - 1")
    require(snap, runner, r"tf\.cond\(should_eval, lambda: eval_loop\(\)", "eval on device inside the train program")
    require(snap, model, r"MomentumOptimizer", "SGD with momentum")
    require(snap, model, r"CrossShardOptimizer", "the optimizer wrapped in CrossShardOptimizer")
    hp = parse_hparams(flag(flags, "hparams"))
    if hp.get("use_bfloat16") != "true":
        raise SystemExit(f"ssd {topo}: use_bfloat16 is not true")
    eval_steps = [int(s) for s in re.search(r"EVAL_STEPS = \(([^)]*)\)", snap.show(consts))[1].split(",")]
    cum, total = [], 0
    for s in eval_steps:
        total += s
        cum.append(total)
    eval_loops = [c // SSD_LOOP_IMAGES_AT_32 - 1 for c in cum]          # loop index after which eval runs
    loops_per_block = [eval_loops[0] + 1] + [b - a for a, b in zip(eval_loops, eval_loops[1:])]
    replicas = int(flag(flags, "num_shards"))
    ways = math.prod(int(v) for v in flags.get("input_partition_dims", ["1"]))
    group = int(hp.get("distributed_group_size", "1"))
    ipl = int(flag(flags, "iterations_per_loop"))
    eval_batch = int(flag(flags, "eval_batch_size"))
    return dict(
        cores=replicas * ways, replicas=replicas, spatial_ways=ways,
        train_batch=int(flag(flags, "train_batch_size")), optimizer="momentum", grad_dtype="fp32",
        bn_group_cores=group * ways if group > 1 else None, steps_per_loop=ipl,
        marker="eval_start", runner_file="train_and_eval_low_level_runner.py",
        block_steps=[n * ipl for n in loops_per_block],
        eval_images=math.ceil(5000 / eval_batch) * eval_batch,          # eval_samples default 5000
        opt_file=model, code=[runner, consts, model])


def cfg_mask(snap, topo, flags):
    code = f"{impl_dir('mask', topo)}/mask_rcnn"
    runner, params, model = (f"{code}/train_and_eval_low_level_runner.py",
                             f"{code}/mask_rcnn_params.py", f"{code}/mask_rcnn_model.py")
    require(snap, runner, r"with tf\.control_dependencies\(train_loop\(\)\):\s*return eval_loop\(\)",
            "one device program: train loop, then eval loop")
    require(snap, params, r"all_in_one_session=True", "train and eval in one session")
    require(snap, params, r"is_training_bn=False", "frozen batch norm (no cross-replica BN)")
    require(snap, params, r"use_bfloat16=True", "bfloat16")
    require(snap, params, r"eval_samples=5000", "5,000 eval images")
    require(snap, model, r"MomentumOptimizer", "SGD with momentum")
    require(snap, model, r"CrossShardOptimizer", "the optimizer wrapped in CrossShardOptimizer")
    hp = parse_hparams(flag(flags, "hparams"))
    cores = int(flag(flags, "num_cores"))
    ways = math.prod(int(v) for v in flags.get("input_partition_dims", ["1"]))
    return dict(
        cores=cores, replicas=cores // ways, spatial_ways=ways, train_batch=int(hp["train_batch_size"]),
        optimizer="momentum", grad_dtype="fp32", bn_group_cores=None,
        steps_per_loop=int(hp["iterations_per_loop"]),
        marker="block_stop", runner_file="train_and_eval_low_level_runner.py",
        eval_images=5000, opt_file=model, code=[runner, params, model])


def cfg_transformer(snap, topo, flags):
    code = f"{impl_dir('transformer', topo)}/transformer"
    runner, trainer, optimize, model = (f"{code}/utils/low_level_runner.py", f"{code}/utils/trainer_lib.py",
                                        f"{code}/utils/optimize.py", f"{code}/models/transformer.py")
    require(snap, runner, r"with tf\.control_dependencies\(train_loop\(\)\):\s*return eval_loop\(\)",
            "one device program: train loop, then decode loop")
    require(snap, optimize, r"CrossShardOptimizer", "the optimizer wrapped in CrossShardOptimizer")
    require(snap, model, r'activation_dtype = "bfloat16"', "bfloat16 activations in transformer_mlperf_tpu")
    hp = parse_hparams(flag(flags, "hparams"))
    replicas = int(flag(flags, "tpu_num_shards"))
    return dict(
        cores=replicas, replicas=replicas, spatial_ways=1,
        train_batch=int(hp["batch_size"]) // TRANSFORMER_PACKED_LEN * replicas,
        optimizer="adam",
        grad_dtype="bf16" if hp.get("bfloat16_grads_all_reduce") == "true" else "fp32",
        bn_group_cores=None, steps_per_loop=int(flag(flags, "iterations_per_loop")),
        marker="eval_start", runner_file="trainer_lib.py", opt_file=optimize,
        code=[runner, trainer, optimize, model])


def cfg_gnmt(snap, topo, flags):
    code = f"{impl_dir('gnmt', topo)}/nmt"
    runner, estimator, model, nmt = (f"{code}/low_level_runner.py", f"{code}/estimator.py",
                                     f"{code}/model.py", f"{code}/nmt.py")
    require(snap, runner, r"with tf\.control_dependencies\(train_loop\(\)\):\s*return eval_loop\(\)",
            "one device program: train loop, then decode loop")
    require(snap, estimator, r"steps_per_epoch = int\(hparams\.num_examples_per_epoch/hparams\.batch_size\)",
            "one device loop = int(num_examples_per_epoch / batch_size) steps")
    require(snap, model, r"CrossShardOptimizer", "the optimizer wrapped in CrossShardOptimizer")
    require(snap, nmt, r'"--optimizer", type=str, default="adam"', "Adam as the optimizer default")
    if flag(flags, "activation_dtype") != "bfloat16":
        raise SystemExit(f"gnmt {topo}: activation_dtype is not bfloat16")
    replicas = int(flag(flags, "num_shards"))
    batch = int(flag(flags, "batch_size"))
    return dict(
        cores=replicas, replicas=replicas, spatial_ways=1, train_batch=batch, optimizer="adam",
        grad_dtype="fp32", bn_group_cores=None,
        steps_per_loop=int(int(flag(flags, "num_examples_per_epoch")) / batch),
        marker="eval_start", runner_file="low_level_runner.py", opt_file=model,
        code=[runner, estimator, model, nmt])


CONFIG = {"resnet": cfg_resnet, "ssd": cfg_ssd, "mask": cfg_mask,
          "transformer": cfg_transformer, "gnmt": cfg_gnmt}
WORKLOAD = {"resnet": "resnet50", "ssd": "ssd-resnet34", "mask": "mask-rcnn",
            "transformer": "transformer-big", "gnmt": "gnmt"}

UPDATE_SOURCE = (
    "the code wraps the optimizer in tf.contrib.tpu.CrossShardOptimizer ({opt}), i.e. the graph is "
    "all-reduce + replicated update, and no flag or code in the submission selects weight-update "
    "sharding; " + XU + " describe it as an automatic XLA pass needing no model-code change and say "
    "it was used in Google's MLPerf 0.6 submission; the abstract of " + KUMAR + " {kumar}; neither "
    "says which benchmark and slice ran it, so the update behind this time is unknown")
_CREDIT = "lists it among the optimizations behind the Transformer, ResNet-50 and SSD results"
KUMAR_SAYS = {
    "resnet": _CREDIT, "ssd": _CREDIT, "transformer": _CREDIT,
    "mask": "credits those optimizations for Transformer, ResNet-50 and SSD only (not Mask R-CNN)",
    "gnmt": "credits those optimizations for Transformer, ResNet-50 and SSD only (not GNMT)",
}


# ------------------------------------------------------------------ timing
def block_durations(events, marker, runner_file):
    """Durations of the timed blocks: run_start -> 1st marker -> 2nd marker ...

    Each marker is logged by the host right after it has read the last on-device eval
    output of a block (see the README), so consecutive markers bound one device block.
    """
    starts = [t for t, k, _, _ in events if k == "run_start"]
    marks = [(t, meta) for t, k, _, meta in events if k == marker]
    if len(starts) != 1 or not marks:
        raise SystemExit(f"log without one run_start and {marker} lines")
    for _, meta in marks:
        if not str(meta.get("file", "")).endswith(runner_file):
            raise SystemExit(f"{marker} logged from {meta.get('file')}, expected {runner_file}")
    return sorted(t for t, _ in marks), starts[0]


def ols(xs, ys):
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return slope, my - slope * mx


def run_times(bench, cfg, events):
    """Per-run figures: dict(step=..., [intercept, bound]) from the steady blocks (2..N)."""
    times, run_start = block_durations(events, cfg["marker"], cfg["runner_file"])
    if bench == "ssd":
        # eval_start k is logged just before the host waits for eval k: block k ends at
        # eval_start k+1; the first one is logged at run start.
        ends = times[1:]
        steps = cfg["block_steps"][:len(ends)]
        start = times[0]
    else:
        ends = times
        steps = [cfg["steps_per_loop"]] * len(ends)
        start = run_start
    edges = [start] + ends
    durs = [b - a for a, b in zip(edges, edges[1:])]
    steady = list(zip(steps, durs))[1:]                     # block 1 holds warm-up
    if not steady:
        raise SystemExit("fewer than two timed blocks")
    per_step = [d / s for s, d in steady]
    if bench != "ssd":
        return dict(step=statistics.median(per_step), blocks=len(steady))
    xs = [s for s, _ in steady]
    if len(set(xs)) < 2:
        raise SystemExit("SSD run without blocks of two different lengths")
    slope, intercept = ols(xs, [d for _, d in steady])
    shortest = min(xs)
    bound = statistics.median(d / s for s, d in steady if s == shortest)
    return dict(step=slope, intercept=intercept, bound=bound, blocks=len(steady),
                lengths=sorted(set(xs)))


# ------------------------------------------------------------------- rows
def methods(bench, cfg, runs):
    """(kind, measured, lo, hi, method sentence) for one slice."""
    spl = cfg["steps_per_loop"]
    lo_n, hi_n = min(r["blocks"] for r in runs), max(r["blocks"] for r in runs)
    nblocks = f"{lo_n}" if lo_n == hi_n else f"{lo_n}-{hi_n}"
    steps = [r["step"] for r in runs]
    if bench == "ssd":
        icpt = statistics.median(r["intercept"] for r in runs)
        bounds = [r["bound"] for r in runs]
        lengths = "/".join(str(x) for x in runs[0]["lengths"][::-1])
        if icpt >= 0:
            return ("exact", statistics.median(steps), min(steps), max(steps),
                    f"Per run, OLS of block duration (between consecutive eval_start lines) on steps per "
                    f"block ({lengths} steps = 2 and 1 device loops) over blocks 2 onward ({nblocks} blocks); "
                    f"the slope is the training-only step time and the intercept (median {icpt:.3f} s) the "
                    f"per-block on-device eval of {cfg['eval_images']} padded images + host sync; row = median "
                    f"slope over runs (block/steps upper bound: {statistics.median(bounds):.6f} s)")
        return ("bound", statistics.median(bounds), min(bounds), max(bounds),
                f"The OLS split of block duration on steps per block ({lengths} steps) gives a negative "
                f"per-block cost (median intercept {icpt:.3f} s, slope {statistics.median(steps):.6f} s), "
                f"which is not physical (the 2-loop block runs slower than two 1-loop blocks), so the split "
                f"is not used; row = median over runs of (1-loop block duration between consecutive "
                f"eval_start lines) / {spl} steps, which includes the on-device eval of "
                f"{cfg['eval_images']} padded images")
    lo, hi, med = min(steps), max(steps), statistics.median(steps)
    if bench == "resnet":
        share = cfg["eval_images"] * INFER_PER_TRAIN / (spl * cfg["train_batch"])
        return ("exact", med, lo, hi,
                f"Per run, median over blocks 2 onward ({nblocks} blocks) of (time between consecutive "
                f"eval_accuracy lines) / {spl} steps; each block also runs the on-device eval of "
                f"{cfg['eval_images']} padded images, estimated at {100 * share:.2f}% of the block "
                f"(inference image = 1/3 training image) and not removed, so the value is high by about that")
    if bench == "mask":
        share = cfg["eval_images"] * INFER_PER_TRAIN / (spl * cfg["train_batch"])
        return ("bound", med, lo, hi,
                f"Per run, median over blocks 2 onward ({nblocks} blocks) of (time between consecutive "
                f"block_stop lines, logged when the host has read the last on-device eval output) / {spl} "
                f"steps; every block includes on-device inference on {cfg['eval_images']} val images "
                f"(~{100 * share:.1f}% by image count at inference = 1/3 training, but proposal/NMS/mask-head "
                f"inference work makes that uncertain) which cannot be separated")
    what = {"transformer": "beam-search decode of the eval set",
            "gnmt": "beam-search decode of the 3003-sentence eval set"}[bench]
    return ("bound", med, lo, hi,
            f"Per run, median over blocks 2 onward ({nblocks} blocks) of (time between consecutive "
            f"eval_start lines, logged when the host has read a block's decode outputs) / {spl} steps; "
            f"every block includes the on-device {what}, which cannot be separated")


def build_rows(snap):
    results = snap.ls("Google/results")
    rows = []
    for bench in BENCHMARKS:
        for topo in SLICES:
            logs = [p for p in results if re.fullmatch(rf"Google/results/{topo}/{bench}/result_\d+\.txt", p)]
            if not logs:
                continue
            script = f"Google/benchmarks/{bench}/{topo}/run_and_time.sh"
            cfg = CONFIG[bench](snap, topo, parse_flags(snap.show(script)))
            cores = int(topo.rsplit("-", 1)[1])
            if cfg["cores"] != cores:
                raise SystemExit(f"{bench} {topo}: flags give {cfg['cores']} cores")
            per_run, batches = [], []
            for path in logs:
                events = parse_log(snap.show(path))
                platform = [v for _, k, v, _ in events if k == "submission_platform"]
                if platform != [topo]:
                    raise SystemExit(f"{path}: submission_platform {platform}")
                batches.append(only([v for _, k, v, _ in events if k == "global_batch_size"], path))
                per_run.append(run_times(bench, cfg, events))
            global_batch = only(batches, f"{bench} {topo} global_batch_size")
            if global_batch != cfg["train_batch"]:
                raise SystemExit(f"{bench} {topo}: log batch {global_batch} != flags {cfg['train_batch']}")
            if global_batch % cfg["replicas"]:
                raise SystemExit(f"{bench} {topo}: batch {global_batch} not divisible by replicas")
            kind, med, lo, hi, method = methods(bench, cfg, per_run)
            nums = sorted(int(re.search(r"result_(\d+)", p)[1]) for p in logs)
            if nums != list(range(len(nums))):
                raise SystemExit(f"{bench} {topo}: result files not numbered 0..N-1")
            sources = [f"Google/results/{topo}/{bench}/result_[0-{nums[-1]}].txt", script] + cfg["code"]
            rows.append({
                "benchmark": bench, "workload": WORKLOAD[bench], "topology": topo, "cores": cores,
                "replicas": cfg["replicas"], "spatial_ways": cfg["spatial_ways"],
                "global_batch": global_batch, "per_replica_batch": global_batch // cfg["replicas"],
                "optimizer": cfg["optimizer"], "precision": PRECISION,
                "grad_allreduce_dtype": cfg["grad_dtype"],
                "bn_group_cores": "" if cfg["bn_group_cores"] is None else cfg["bn_group_cores"],
                "steps_per_loop": cfg["steps_per_loop"], "eval_on_device": "true",
                "update": "unknown",
                "update_source": UPDATE_SOURCE.format(opt=cfg["opt_file"].rsplit("/", 1)[1],
                                                      kumar=KUMAR_SAYS[bench]),
                "measured_step_s": fmt(med), "step_s_min": fmt(lo), "step_s_max": fmt(hi),
                "runs": len(logs), "kind": kind, "method": method,
                "sources": "; ".join(sources),
            })
    return rows


def render(rows):
    return render_csv(COLUMNS, rows)


def main(argv=None):
    return generator_main(argv, description=__doc__.splitlines()[0], snapshot=DEFAULT_SNAPSHOT, upstream=UPSTREAM,
                          pinned=PINNED[:12], out=OUT, build=lambda repo: render(build_rows(Snapshot(repo))),
                          tool="tests/tools/regenerate_mlperf_v06.py")


if __name__ == "__main__":
    sys.exit(main())
