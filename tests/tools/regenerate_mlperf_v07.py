"""Regenerate the measured MLPerf v0.7 TPU-v3 step times from Google's public logs.

Not runtime code and not shipped with the simulator's loader: it writes
``wus_sim/data/validation/mlperf_v07_tpu_v3.csv`` (the v0.6 table's columns plus a last
column ``round``; method and caveats: section "v0.7" of
``wus_sim/data/validation/README.md``). Run it from the repository root with a clone
(bare or not) of github.com/mlcommons/training_results_v0.7 that contains the pinned
commit::

    python tests/tools/regenerate_mlperf_v07.py [--repo PATH] [--check]

``--check`` writes nothing and exits 1 if the shipped CSV differs from what would be
written. Everything is read with ``git show PINNED:path``, so a newer checkout gives
the same table.

Only TPU-v3 material is read: ``Google/results/tpu-v3-*``, ``Google/systems/tpu-v3-*``
and the tpu-v3 run scripts and implementations under ``Google/benchmarks/<bench>/``.
:class:`Snapshot` refuses any other path (results of later TPU generations are kept
for independent checking and must not be read).

What comes from where (paths in that repository, at PINNED):

* timestamps: ``Google/results/tpu-v3-<N>-<FW>/<bench>/result_*.txt``
  (``:::MLLOG {"time_ms": ..., "key": ..., "value": ..., "metadata": {...}}`` lines);
  the global batch from the logs' ``global_batch_size``.
* replicas, partitioning, loop lengths, batch-norm groups, gradient all-reduce dtype,
  weight-update sharding flags: ``Google/benchmarks/<bench>/tpu-v3-<N>-<FW>/run_and_time.sh``
  (defaults they leave unset are read from, or checked in, the implementation code).
* what each timestamp is written after (a device sync or not), and what one timed
  interval contains: the implementation code in
  ``Google/benchmarks/<bench>/implementations/<bench>-<status>-<FW>-tpu-v3-<N>/``; the
  facts this table relies on are checked by :func:`require`, so that a different commit
  that broke them fails instead of giving a silently wrong table.
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
OUT = REPO / "wus_sim" / "data" / "validation" / "mlperf_v07_tpu_v3.csv"
DEFAULT_SNAPSHOT = Path("/work/.mirror/mlcommons+training_results_v0.7/repo")
UPSTREAM = "github.com/mlcommons/training_results_v0.7"
PINNED = "0a8a85a209c8e45b661596c382cc20f4e32fd2fe"
ROUND = "v0.7"

COLUMNS = [
    "benchmark", "workload", "topology", "cores", "replicas", "spatial_ways",
    "global_batch", "per_replica_batch", "optimizer", "precision", "grad_allreduce_dtype",
    "bn_group_cores", "steps_per_loop", "eval_on_device", "update", "update_source",
    "measured_step_s", "step_s_min", "step_s_max", "runs", "kind", "method", "sources",
    "round", "framework",
]

PRECISION = "bf16 activations / fp32 weights"
# An example of inference is taken as 1/3 of a training one (forward only, against
# forward + two backward passes) in the eval-share estimates below, as for v0.6.
INFER_PER_TRAIN = 1 / 3
CATCH_UP = 0.8          # SSD: leading blocks shorter than this x the run's median are catch-up
XU = "Xu et al. 2020 (arXiv 2004.13336)"
WUS_FLAG = "--xla_jf_auto_cross_replica_sharding=true"

B = "Google/benchmarks"
IMPL = {
    ("resnet", "tpu-v3-32-TF2.0"): f"{B}/resnet/implementations/resnet-cloud-TF2.0-tpu-v3-32",
    ("resnet", "tpu-v3-8192-TF"): f"{B}/resnet/implementations/resnet-research-TF-tpu-v3-8192",
    ("resnet", "tpu-v3-8192-JAX"): f"{B}/resnet/implementations/resnet-research-JAX-tpu-v3-8192",
    ("bert", "tpu-v3-32-TF2.0"): f"{B}/bert/implementations/bert-cloud-TF2.0-tpu-v3-32",
    ("bert", "tpu-v3-8192-TF"): f"{B}/bert/implementations/bert-research-TF-tpu-v3-8192",
    ("bert", "tpu-v3-8192-JAX"): f"{B}/bert/implementations/bert-research-JAX-tpu-v3-8192",
    ("transformer", "tpu-v3-8192-TF"): f"{B}/transformer/implementations/transformer-research-TF-tpu-v3-8192",
    ("transformer", "tpu-v3-8192-JAX"): f"{B}/transformer/implementations/transformer-research-JAX-tpu-v3-8192",
    ("ssd", "tpu-v3-8192-TF"): f"{B}/ssd/implementations/ssd-research-TF-tpu-v3-8192",
    ("ssd", "tpu-v3-4096-JAX"): f"{B}/ssd/implementations/ssd-research-JAX-tpu-v3-4096",
    ("maskrcnn", "tpu-v3-1024-TF"): f"{B}/maskrcnn/implementations/maskrcnn-research-TF-tpu-v3-1024",
    ("gnmt", "tpu-v3-1024-TF"): f"{B}/gnmt/implementations/gnmt-research-TF-tpu-v3-1024",
}
WORKLOAD = {"resnet": "resnet50", "bert": "bert-large", "transformer": "transformer-big",
            "ssd": "ssd-resnet34", "maskrcnn": "mask-rcnn", "gnmt": "gnmt"}
BENCH_ORDER = ["resnet", "bert", "transformer", "ssd", "maskrcnn", "gnmt"]
# benchmark x submission with logs that gets no row, and why (checked to still hold below)
SKIPPED = {
    ("transformer", "tpu-v3-8192-JAX"):
        "the run script is a bare 'wmt.par' with no flags, and with train.py's defaults "
        "(num_partitions=1, global batch min(16 x 8192, 2048) = 2048) each of the 16 local "
        "replicas of a host would get 2048 // (16 x 512 hosts) = 0 sequences; the run must "
        "have used a model-partitioning setting the public files do not state, so replicas "
        "and spatial_ways are unknown",
    ("ssd", "tpu-v3-4096-JAX"):
        "no timestamp is written after a device sync on one clock with a steady lag: "
        "block_start/block_stop/eval_start bracket host-side infeed and dispatch, which run "
        "ahead of the device without back-pressure, and eval_accuracy is written after COCO "
        "scoring on the CPU, by a different host for each eval (epoch index mod host count)",
}


# ------------------------------------------------------------------ git access
def _allowed(path):
    """Only TPU-v3 material may be read (see the module docstring)."""
    if re.search(r"v4", path, re.IGNORECASE):
        return False
    return bool(re.match(r"Google/(results|systems)/tpu-v3-", path)
                or re.match(rf"{B}/[a-z]+/(tpu-v3-|implementations/[a-z]+-[a-z]+-[A-Za-z0-9.]+-tpu-v3-)", path))


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

    def tpu_v3_dirs(self, parent):
        """Names of the ``tpu-v3-*`` entries of *parent* (other names are dropped unread)."""
        out = self._git("ls-tree", "--name-only", f"{self.commit}:{parent}").stdout.split()
        return sorted(n for n in out if re.fullmatch(r"tpu-v3-\d+-[A-Za-z0-9.]+(\.json)?", n))

    def ls(self, prefix):
        if not _allowed(prefix + "/"):
            raise SystemExit(f"refusing to list {prefix}: not TPU-v3 material")
        out = self._git("ls-tree", "-r", "--name-only", self.commit, prefix).stdout
        return sorted(out.split())

    def show(self, path):
        if not _allowed(path):
            raise SystemExit(f"refusing to read {path}: not TPU-v3 material")
        if path not in self._cache:
            res = self._git("show", f"{self.commit}:{path}", check=False)
            if res.returncode != 0:
                raise SystemExit(f"{path}: not in {UPSTREAM} at {self.commit}")
            self._cache[path] = res.stdout
        return self._cache[path]


def require(snap, path, pattern, what):
    """Fail unless *pattern* (a regex) occurs in *path*: a code fact this table relies on."""
    if not re.search(pattern, snap.show(path), re.DOTALL):
        raise SystemExit(f"{path}: expected {what} (pattern {pattern!r}) at {snap.commit}")


def grab(snap, path, pattern, what, cast=int):
    m = re.search(pattern, snap.show(path), re.DOTALL)
    if not m:
        raise SystemExit(f"{path}: expected {what} (pattern {pattern!r}) at {snap.commit}")
    return cast(m[1])


# ------------------------------------------------------------------- parsing
def parse_log(text):
    """(events, comments): events [(unix time s, key, value, metadata)] in file order."""
    events, comments = [], []
    for line in text.splitlines():
        if line.startswith(":::MLLOG "):
            body = json.loads(line[len(":::MLLOG "):])
            events.append((body["time_ms"] / 1000, body["key"], body.get("value"),
                           body.get("metadata") or {}))
        elif line.startswith("#"):
            comments.append(line)
    return events, comments


def parse_flags(script):
    """Flags of run_and_time.sh -> {key: [values in order]}; ``--x`` is 'True', ``--nox`` 'False'."""
    flags = {}
    for token in script.replace("\\\n", " ").split():
        token = token.strip("'\"")
        if not token.startswith("--") or "$" in token:
            continue
        if "=" in token:
            key, value = token[2:].split("=", 1)
        elif token.startswith("--no"):
            key, value = token[4:], "False"
        else:
            key, value = token[2:], "True"
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


def pct(x):
    return f"{100 * x:.2f}%"


def eval_share(eval_examples, steps, batch):
    return eval_examples * INFER_PER_TRAIN / (steps * batch)


# ------------------------------------------------------------ update evidence
def update_unknown(how, flags_note="no flag in run_and_time.sh selects weight-update sharding"):
    return (f"{how}; {flags_note} (the BERT JAX run script of this round sets {WUS_FLAG}, "
            f"this one does not) and the default of the internal XLA build is not published, "
            f"so the update behind this time is unknown")


def cross_shard(file):
    return (f"the code wraps the optimizer in CrossShardOptimizer ({file}), i.e. the graph is "
            f"all-reduce + replicated update")


# ------------------------------------------------------ per-submission configs
# Each returns dict(replicas, spatial_ways, train_batch, optimizer, grad_dtype, bn_group_cores,
# steps_per_loop, framework, update, update_source, timing=dict(...), code=[paths], notes).
def cfg_resnet_tf2(snap, sub, flags, impl):
    main, runnable, common = (f"{impl}/resnet_ctl_imagenet_main.py", f"{impl}/resnet_runnable.py",
                              f"{impl}/common.py")
    ctrl, std, pre = (f"{impl}/tf2_common/training/controller.py",
                      f"{impl}/tf2_common/training/standard_runnable.py",
                      f"{impl}/imagenet_preprocessing.py")
    utils = f"{impl}/tf2_common/training/utils.py"
    require(snap, common, r"flags\.DEFINE_boolean\('drop_train_remainder', True",
            "drop_train_remainder defaulting to True (steps per epoch = images // batch)")
    require(snap, common, r"steps_per_epoch = \(\s*imagenet_preprocessing\.NUM_IMAGES\['train'\] // "
                          r"flags_obj\.batch_size\)",
            "steps per epoch = NUM_IMAGES['train'] // batch_size")
    require(snap, main, r"steps_per_loop = min\(flags_obj\.steps_per_loop, per_epoch_steps\)",
            "the host loop capped at one epoch")
    require(snap, main, r"flags_obj\.epochs_between_evals \*\s*per_epoch_steps",
            "eval interval = epochs_between_evals x steps per epoch")
    require(snap, ctrl, r"train_outputs = self\.train_fn\(steps_per_loop\).*?if current_step != "
                        r"self\.global_step\.numpy\(\):"
            r".*?continue_training = self\._maybe_evaluate\(current_step\)",
            "the host reading global_step (a device sync) after each train loop, before the eval")
    require(snap, std, r"if self\.use_tf_while_loop:\s*self\.train_loop_fn = "
                       r"utils\.create_tf_while_loop_fn\(train_fn\)",
            "the train loop built as a tf.while_loop")
    require(snap, utils, r"def create_tf_while_loop_fn\(step_fn\):.*?for _ in tf\.range\(num_steps\):\s*"
                         r"step_fn\(iterator\)",
            "a tf.while_loop of steps on the host per train_fn call")
    require(snap, runnable, r"def eval_begin\(self\):.*?mlp_log\.mlperf_print\(\s*'eval_start'",
            "eval_start written when the eval begins")
    require(snap, runnable, r"eval_accuracy = float\(self\.test_accuracy\.result\(\)\).*?'eval_accuracy', "
                            r"eval_accuracy",
            "eval_accuracy written after reading the eval metric (a device sync)")
    require(snap, runnable, r"self\.optimizer\.apply_gradients\(zip\(grads, self\.model\.trainable_variables\)\)",
            "gradients applied by the Keras optimizer (all-reduce inside apply_gradients)")
    require(snap, main, r"name='num_replicas',\s*default=32", "32 replicas (v3-32 cores) for the log")
    images = grab(snap, pre, r"'train': (\d+)", "the ImageNet train image count")
    batch = int(flag(flags, "batch_size"))
    per_epoch = images // batch
    spl = min(int(flag(flags, "steps_per_loop")), per_epoch)
    interval = int(flag(flags, "epochs_between_evals")) * per_epoch
    if interval % spl:
        raise SystemExit("resnet TF2: eval interval is not a whole number of host loops")
    if flag(flags, "optimizer") != "LARS" or flag(flags, "dtype") != "bf16":
        raise SystemExit("resnet TF2: expected --optimizer=LARS --dtype=bf16")
    return dict(
        replicas=None, spatial_ways=1, train_batch=batch, optimizer="lars", grad_dtype="fp32",
        bn_group_cores=None, steps_per_loop=spl, framework="TF2",
        update="unknown", update_source=update_unknown(
            "resnet_runnable.py applies the gradients with the Keras LARS optimizer under "
            "TPUStrategy, which all-reduces them inside apply_gradients and updates every replica"),
        timing=dict(style="train_only", start="eval_accuracy", end="eval_start",
                    file="resnet_runnable.py", steps=interval, loops=interval // spl,
                    epochs=int(flag(flags, "epochs_between_evals"))),
        code=[main, runnable, common, ctrl, std, utils])


def cfg_resnet_tf1(snap, sub, flags, impl):
    main, runner = f"{impl}/resnet_main.py", f"{impl}/util/train_and_eval_runner.py"
    _runner_facts(snap, runner)
    require(snap, main, r"'precision', default='bfloat16'", "bfloat16 as the precision default")
    require(snap, main, r"tf\.tpu\.CrossShardOptimizer\(optimizer\)", "the optimizer wrapped in CrossShardOptimizer")
    require(snap, main, r"'num_eval_images', default=50000", "50,000 eval images")
    require(snap, main, r"def eval_finish_fn\(cur_step, eval_output, summary_writer\):.*?'eval_accuracy'",
            "eval_accuracy written in eval_finish_fn (after the host read the block's eval outfeed)")
    require(snap, main, r"int\(math\.ceil\(FLAGS\.num_eval_images / FLAGS\.eval_batch_size\)\)",
            "eval steps = ceil(num_eval_images / eval_batch_size)")
    require(snap, main, r"distributed_group_size=FLAGS\.distributed_group_size", "distributed batch norm groups")
    ipl = int(flag(flags, "iterations_per_loop"))
    if int(flag(flags, "steps_per_eval")) != ipl or flag(flags, "enable_lars") != "True":
        raise SystemExit("resnet TF1: expected steps_per_eval == iterations_per_loop and --enable_lars")
    eval_batch = int(flag(flags, "eval_batch_size"))
    group = int(flag(flags, "distributed_group_size", "1"))
    replicas = int(flag(flags, "num_replicas"))
    return dict(
        replicas=replicas, spatial_ways=1, train_batch=int(flag(flags, "train_batch_size")),
        optimizer="lars", grad_dtype="fp32", bn_group_cores=group if group > 1 else None,
        steps_per_loop=ipl, framework="TF1", update="unknown",
        update_source=update_unknown(cross_shard("resnet_main.py")),
        timing=dict(style="period", marker="eval_accuracy", file="resnet_main.py", steps=ipl,
                    wait_from="block_start",
                    eval_examples=math.ceil(50000 / eval_batch) * eval_batch,
                    eval_what="the on-device eval of {e} padded images (est. {s} of the block)",
                    writer="written after the host has read the block's last eval outfeed"),
        code=[main, runner])


def _runner_facts(snap, runner):
    """util/train_and_eval_runner.py (TF1 sessions): train loop then eval loop, one device program."""
    require(snap, runner, r"def train_eval_step\(\):\s*with tf\.control_dependencies\(train_loop\(\)\):\s*"
            r"if self\.eval_steps > 0:\s*return self\.eval_loop\(\)",
            "one device program: train loop, then eval loop")
    require(snap, runner, r"for _ in range\(self\.num_outfeeds\):\s*for i, t in "
                          r"enumerate\(self\.output_sess\.run\(self\.dequeue_ops\)\):"
            r".*?eval_finish_fn\(\s*cur_step, eval_output, summary_writer\)",
            "eval_finish_fn called after the host has dequeued all of a block's eval outfeed")
    require(snap, runner, r"if not success and eval_init_fn:\s*eval_init_fn\(cur_step\)\s*eval_output",
            "eval_init_fn called before the host waits for the block's outfeed")


def cfg_resnet_jax(snap, sub, flags, impl):
    train, pipe = f"{impl}/train.py", f"{impl}/mlperf_input_pipeline.py"
    require(snap, train, r"'lars', default=True", "LARS as the default optimizer")
    require(snap, train, r"'bfloat16', default=True", "bfloat16 as the default")
    require(snap, train, r"'epochs_per_loop', default=4", "4 epochs per device loop")
    require(snap, train, r"steps_per_loop = int\(math\.ceil\(steps_per_epoch \* FLAGS\.epochs_per_loop\)\)",
            "steps per device loop = ceil(steps per epoch x epochs_per_loop)")
    require(snap, train, r"eval_batch_size = min\(input_pipeline\.EVAL_IMAGES, 256 \* jax\.device_count\(\)\)",
            "eval batch = min(50000, 256 x devices)")
    require(snap, train, r"device_eval_batch_size = int\(math\.ceil\(eval_batch_size / jax\.device_count\(\)\)\)",
            "per-device eval batch")
    require(snap, train, r"def write_summary\(.*?jax\.device_get\(x\[0\]\).*?mllogger\.event\('eval_accuracy'",
            "eval_accuracy written by the summary thread after jax.device_get of the eval metrics")
    require(snap, train, r"grad = lax\.pmean\(grad, 'batch'\)\s*new_optimizer = optimizer\.apply_gradient",
            "gradients all-reduced with lax.pmean in their own (float32) dtype, then applied on every replica")
    require(snap, train, r"batchnorm_span = max\(batch_size, 64\)", "batch-norm span max(per-device batch, 64)")
    require(snap, train, r"'TPUv3-\{\}'\.format\(jax\.device_count\(\)\)",
                         "submission_platform naming the device count")
    images = grab(snap, pipe, r"TRAIN_IMAGES = (\d+)", "ImageNet train images")
    eval_images = grab(snap, pipe, r"EVAL_IMAGES = (\d+)", "ImageNet eval images")
    batch = int(flag(flags, "batch_size"))
    devices = int(sub.split("-")[2])                    # one pmap device per core
    eval_batch = min(eval_images, 256 * devices)
    eval_examples = math.ceil(eval_images / eval_batch) * math.ceil(eval_batch / devices) * devices
    return dict(
        replicas=None, spatial_ways=1, train_batch=batch, optimizer="lars", grad_dtype="fp32",
        bn_group_cores="from_log", steps_per_loop=math.ceil(images / batch * 4), framework="JAX",
        update="unknown",
        update_source=("train.py all-reduces the gradients with lax.pmean and applies LARS on every "
                       "replica; the optimizer is passed to pmap unmapped (in_axes None), the call "
                       "pattern BERT JAX uses under --enable_wus, but this run script passes only "
                       f"--batch_size (no --enable_wus, no {WUS_FLAG}), so the update behind this "
                       "time is unknown"),
        timing=dict(style="period", marker="eval_accuracy", file="train.py",
                    steps=math.ceil(images / batch * 4), eval_examples=eval_examples,
                    eval_what="the on-device eval of {e} padded images (est. {s} of the block)",
                    writer="written by the summary thread after jax.device_get of the block's eval metrics"),
        code=[train, pipe])


def cfg_bert_tf2(snap, sub, flags, impl):
    mtu, run, cf = (f"{impl}/tf2_common/modeling/model_training_utils.py", f"{impl}/bert/run_pretraining.py",
                    f"{impl}/bert/common_flags.py")
    require(snap, mtu, r"train_steps\(train_iterator, tf\.convert_to_tensor\(steps, dtype=tf\.int32\)\)\s*"
            r"train_loss = _float_metric_value\(train_loss_metric\)\s*_run_callbacks_on_batch_end",
            "block_stop written after reading the train loss (a device sync) at the end of each host loop")
    require(snap, mtu, r"def _run_callbacks_on_batch_end\(batch, logs\):.*?'block_stop'",
                       "block_stop in the loop-end callback")
    require(snap, mtu, r"for _ in tf\.range\(steps\):\s*strategy\.run\(_replicated_step",
                       "a host tf.while_loop of steps")
    require(snap, mtu, r"optimizer\.apply_gradients\(zip\(grads, training_vars\)\)",
                       "Keras apply_gradients (all-reduce inside)")
    require(snap, cf, r"flags\.DEFINE_bool\('explicit_allreduce', False",
                      "no explicit (fp16/bf16) all-reduce by default")
    if flag(flags, "optimizer_type") != "lamb" or flag(flags, "dtype") != "bf16":
        raise SystemExit("bert TF2: expected --optimizer_type=lamb --dtype=bf16")
    spl = int(flag(flags, "steps_per_loop"))
    return dict(
        replicas=None, spatial_ways=1, train_batch=int(flag(flags, "train_batch_size")), optimizer="lamb",
        grad_dtype="fp32", bn_group_cores=None, steps_per_loop=spl, framework="TF2", update="unknown",
        update_source=update_unknown(
            "model_training_utils.py applies the gradients with the Keras LAMB optimizer under "
            "TPUStrategy (explicit_allreduce false), which all-reduces them inside apply_gradients "
            "and updates every replica"),
        timing=dict(style="period_no_eval", marker="block_stop", file="model_training_utils.py",
                    steps=spl, skip_if="eval_start", steps_metadata=True),
        code=[mtu, run, cf])


def cfg_bert_tf1(snap, sub, flags, impl):
    run, runner, opt = f"{impl}/run_pretraining.py", f"{impl}/util/train_and_eval_runner.py", f"{impl}/optimization.py"
    _runner_facts(snap, runner)
    require(snap, run, r"def eval_finish_fn\(cur_step, eval_output, summary_writer\):.*?\"block_stop\"",
            "block_stop written in eval_finish_fn (after the host read the block's eval outfeed)")
    require(snap, run, r"TrainAndEvalRunner\(\s*FLAGS\.iterations_per_loop, FLAGS\.stop_steps \+ 1, "
                       r"FLAGS\.max_eval_steps,\s*"
            r"FLAGS\.num_tpu_cores // FLAGS\.num_partitions\)",
            "replicas = num_tpu_cores // num_partitions, max_eval_steps eval steps per block")
    require(snap, opt, r"if use_bfloat16_all_reduce:\s*grads_tvars = \[\(tf\.cast\(\s*"
                       r"tf\.tpu\.cross_replica_sum\(tf\.cast\(g, tf\.bfloat16\)\)",
            "gradients summed across replicas in bfloat16 when use_bfloat16_all_reduce")
    require(snap, opt, r"train_op = optimizer\.apply_gradients\(grads_tvars", "the optimizer applied on every replica")
    if flag(flags, "optimizer") != "lamb" or flag(flags, "use_bfloat16_all_reduce") != "True":
        raise SystemExit("bert TF1: expected --optimizer=lamb --use_bfloat16_all_reduce")
    ways = int(flag(flags, "num_partitions"))
    ipl = int(flag(flags, "iterations_per_loop"))
    eval_examples = int(flag(flags, "max_eval_steps")) * int(flag(flags, "eval_batch_size"))
    return dict(
        replicas=int(flag(flags, "num_tpu_cores")) // ways, spatial_ways=ways,
        train_batch=int(flag(flags, "train_batch_size")), optimizer="lamb", grad_dtype="bf16",
        bn_group_cores=None, steps_per_loop=ipl, framework="TF1", update="unknown",
        update_source=update_unknown(
            "optimization.py sums the gradients with tf.tpu.cross_replica_sum (in bfloat16) and "
            "applies LAMB on every replica, i.e. all-reduce + replicated update in the graph"),
        timing=dict(style="period", marker="block_stop", file="run_pretraining.py", steps=ipl,
                    wait_from="block_start",
                    eval_examples=eval_examples, steps_metadata=True,
                    eval_what="the on-device eval of {e} sequences (est. {s} of the block)",
                    writer="written after the host has read the block's last eval outfeed"),
        code=[run, runner, opt])


def cfg_bert_jax(snap, sub, flags, impl):
    run = f"{impl}/run_pretraining.py"
    require(snap, run, r"def _write_metrics\(.*?eval_metrics = jax\.tree_map\(jax\.device_get, eval_metrics\).*?"
                       r"'eval_accuracy'",
            "eval_accuracy written by the summary thread after jax.device_get of the eval metrics")
    require(snap, run, r"if num_train_epochs >= 6:\s*# Merge the first 6 epochs.*?steps_per_epoch = "
                       r"np\.int32\(num_steps_per_epoch \* 6\)",
            "the first device loop merged over 6 epochs (no eval before)")
    require(snap, run, r"flags\.DEFINE_bool\('reduce_gradients_in_bf16', True",
                       "bfloat16 gradient all-reduce by default")
    require(snap, run, r"clipped_grads = jax\.tree_map\(lambda x: x\.astype\(jnp\.bfloat16\),\s*clipped_grads\)\s*"
            r"clipped_grads = lax\.psum\(clipped_grads, 'batch'\)", "gradients cast to bfloat16 before the psum")
    require(snap, run, r"flags\.DEFINE_bool\('enable_wus', True, 'Enable Weight update sharding'\)",
                       "the enable_wus flag")
    require(snap, run, r"if FLAGS\.enable_wus:\s*pmap_fn = functools\.partial\(\s*pmap_fn, in_axes=\(None,",
            "under enable_wus the optimizer is passed to pmap unmapped")
    require(snap, run, r"flags\.DEFINE_bool\('use_lamb', True", "LAMB by default")
    if flag(flags, "enable_wus") != "True" or "xla_jf_auto_cross_replica_sharding" not in flags \
            or flag(flags, "xla_jf_auto_cross_replica_sharding") != "true":
        raise SystemExit("bert JAX: expected --enable_wus and --xla_jf_auto_cross_replica_sharding=true")
    hosts = math.prod(int(v) for v in flag(flags, "deepsea_host_bounds").split(","))
    chips = math.prod(int(v) for v in flag(flags, "deepsea_chips_per_host_bounds").split(","))
    spl = int(flag(flags, "num_steps_per_epoch"))
    eval_examples = int(flag(flags, "max_eval_steps")) * int(flag(flags, "eval_batch_size"))
    return dict(
        replicas=hosts * chips * 2, spatial_ways=1, train_batch=int(flag(flags, "train_batch_size")),
        optimizer="lamb", grad_dtype="bf16", bn_group_cores=None, steps_per_loop=spl, framework="JAX",
        update="sharded",
        update_source=("run_and_time.sh sets --enable_wus (flag help 'Enable Weight update sharding'; "
                       "run_pretraining.py then passes the optimizer to pmap unmapped, in_axes None) and "
                       f"{WUS_FLAG}, the XLA option named for the automatic cross-replica sharding of "
                       f"the weight update of {XU}; the update behind this time is taken as sharded"),
        timing=dict(style="period", marker="eval_accuracy", file="run_pretraining.py", steps=spl,
                    eval_examples=eval_examples, steps_metadata=True,
                    eval_what="the on-device eval of {e} sequences (est. {s} of the block)",
                    writer="written by the summary thread after jax.device_get of the block's eval metrics"),
        code=[run], hosts=hosts, chips=chips)


def cfg_transformer_lingvo(snap, sub, flags, impl):
    program, params = f"{impl}/lingvo/core/program.py", f"{impl}/lingvo/tasks/mt/params/mlperf.py"
    pyu, opt = f"{impl}/lingvo/core/py_utils.py", f"{impl}/lingvo/core/optimizer.py"
    model = flag(flags, "model")
    if model != "mt.mlperf.WmtEnDeMlPerfTpuExecutorOneShotFourPod":
        raise SystemExit(f"transformer TF: unexpected --model={model}")
    m = re.search(r"class WmtEnDeMlPerfTpuExecutorOneShotFourPod\(.*?(?=\n@model_registry|\Z)",
                  snap.show(params), re.DOTALL)
    if not m:
        raise SystemExit(f"{params}: no class WmtEnDeMlPerfTpuExecutorOneShotFourPod")
    body = m[0]

    def const(pattern, what):
        g = re.search(pattern, body)
        if not g:
            raise SystemExit(f"{params}: FourPod class without {what}")
        return int(g[1])
    per_replica = const(r"TRAIN_BATCH_SIZE = (\d+)", "TRAIN_BATCH_SIZE")
    ways = const(r"XLA_NUM_PARTITIONS = (\d+)", "XLA_NUM_PARTITIONS")
    spl = const(r"train_steps_per_loop=(\d+)", "train_steps_per_loop")
    gbs = const(r"global_batch_size = (\d+)", "ml_perf.global_batch_size")
    require(snap, program, r"def TrainAndDecode\(\):\s*with tf\.control_dependencies\(\[TpuTrain\(\)\]\):\s*return "
                           r"DecodeLoopFn\(\)",
            "one device program: train loop, then decode loop, repeated num_epochs_per_session_run times")
    require(snap, program, r"metric_dict = sess\.run\(self\.metric_dicts\)\s*if i == 0 and self\._ml_perf_log:\s*"
            r"mlp_log\.mlperf_print\(\s*'block_start'",
            "block_start written right after the host has dequeued the decode outfeed of an epoch")
    require(snap, params, r"p\.train\.optimizer\.use_bf16_gradients_ar = True", "bfloat16 gradient all-reduce on TPU")
    require(snap, pyu, r"if use_bf16_gradients_ar:\s*g = tf\.cast\(g, tf\.bfloat16\).*?tf\.tpu\.cross_replica_sum\(g\)",
            "gradients cast to bfloat16 before cross_replica_sum")
    require(snap, opt, r"return optimizer\.apply_gradients\(", "the optimizer applied on every replica")
    require(snap, params, r"p\.ml_perf\.optimizer_name = 'adam'", "Adam")
    tpus, split = int(flag(flags, "worker_tpus")), int(flag(flags, "worker_split_size"))
    if split != ways or tpus % split:
        raise SystemExit("transformer TF: worker_split_size != XLA_NUM_PARTITIONS")
    if per_replica * tpus // split != gbs:
        raise SystemExit("transformer TF: TRAIN_BATCH_SIZE x replicas != ml_perf.global_batch_size")
    return dict(
        replicas=tpus // split, spatial_ways=ways, train_batch=gbs, optimizer="adam", grad_dtype="bf16",
        bn_group_cores=None, steps_per_loop=spl, framework="TF1",
        framework_note="Lingvo on TF1 sessions", update="unknown",
        update_source=update_unknown(
            "Lingvo's py_utils.ComputeGradients sums the gradients with tf.tpu.cross_replica_sum "
            "(in bfloat16, use_bf16_gradients_ar) and optimizer.py applies Adam on every replica"),
        timing=dict(style="period", marker="block_start", file="program.py", steps=spl,
                    wait_from="block_stop",
                    eval_what="the on-device beam-search decode of the eval set",
                    writer="written right after the host has dequeued an epoch's decode outfeed"),
        code=[program, params, pyu, opt])


def cfg_ssd_tf1(snap, sub, flags, impl):
    main, runner, model, util = (f"{impl}/ssd_main.py", f"{impl}/util/train_and_eval_runner.py",
                                 f"{impl}/ssd_model.py", f"{impl}/util/image_util.py")
    arch = f"{impl}/ssd_architecture.py"
    _runner_facts(snap, runner)
    require(snap, main, r"def eval_finish_fn\(cur_step, eval_output, _\):.*?'block_stop'",
            "block_stop written in eval_finish_fn (after the host read the block's eval outfeed)")
    require(snap, main, r"eval_steps = int\(math\.ceil\(FLAGS\.eval_samples / FLAGS\.eval_batch_size\)\)", "eval steps")
    require(snap, main, r"'eval_samples', 5000", "5,000 eval images")
    require(snap, model, r"tf\.train\.MomentumOptimizer\(.*?tpu_optimizer\.CrossShardOptimizer\(",
            "SGD with momentum wrapped in CrossShardOptimizer")
    require(snap, arch, r"distributed_group_size=params\['distributed_group_size'\]", "distributed batch norm")
    require(snap, util, r"distributed_group_size: number of replicas in the distributed batch norm",
            "distributed_group_size counted in replicas")
    hp = parse_hparams(flag(flags, "hparams"))
    if hp.get("use_bfloat16") != "true":
        raise SystemExit("ssd TF: use_bfloat16 is not true")
    replicas = int(flag(flags, "num_shards"))
    ways = math.prod(int(v) for v in flags.get("input_partition_dims", ["1"]))
    group = int(hp.get("distributed_group_size", "1"))
    ipl = int(flag(flags, "iterations_per_loop"))
    eval_batch = int(flag(flags, "eval_batch_size"))
    return dict(
        replicas=replicas, spatial_ways=ways, train_batch=int(flag(flags, "train_batch_size")),
        optimizer="momentum", grad_dtype="fp32", bn_group_cores=group * ways if group > 1 else None,
        bn_span_check=group, steps_per_loop=ipl, framework="TF1", update="unknown",
        update_source=update_unknown(cross_shard("ssd_model.py")),
        timing=dict(style="period", marker="block_stop", file="ssd_main.py", steps=ipl,
                    wait_from="block_start",
                    eval_examples=math.ceil(5000 / eval_batch) * eval_batch, catch_up=True,
                    drop_commented=True,
                    eval_what="the on-device eval of {e} padded images with NMS (est. {s} of the block)",
                    writer="written after the host has read the block's last eval outfeed"),
        code=[main, runner, model, arch, util])


def cfg_mask(snap, sub, flags, impl):
    main, params, model = f"{impl}/mask_rcnn_main.py", f"{impl}/mask_rcnn_params.py", f"{impl}/mask_rcnn_model.py"
    runner = f"{impl}/util/train_and_eval_runner.py"
    _runner_facts(snap, runner)
    require(snap, main, r"TrainAndEvalRunner\(\s*FLAGS\.num_examples_per_epoch // FLAGS\.train_batch_size, "
                        r"train_steps,\s*eval_steps",
            "one epoch (num_examples_per_epoch // train_batch_size steps) per device loop")
    require(snap, main, r"'num_examples_per_epoch', 118287", "118,287 images per epoch")
    require(snap, main, r"eval_steps = int\(math\.ceil\(float\(FLAGS\.eval_samples\) / "
                        r"FLAGS\.eval_batch_size\)\).*?eval_steps \+= 1",
            "eval steps = ceil(eval_samples / eval_batch_size) + 1")
    require(snap, main, r"def eval_finish_fn\(cur_step, eval_output, _\):.*?'block_stop'.*?eval_multiprocess",
            "block_stop written in eval_finish_fn before the COCO scoring")
    require(snap, main, r"'eval_samples', 5000", "5,000 eval images by default")
    require(snap, params, r"is_training_bn=False", "frozen batch norm")
    require(snap, params, r"use_bfloat16=True", "bfloat16")
    require(snap, model, r"tf\.train\.MomentumOptimizer\(.*?contrib_tpu\.CrossShardOptimizer\(optimizer\)",
            "SGD with momentum wrapped in CrossShardOptimizer")
    eval_samples = int(flag(flags, "eval_samples", "5000"))
    eval_batch = int(flag(flags, "eval_batch_size"))
    batch = int(flag(flags, "train_batch_size"))
    ways = math.prod(int(v) for v in flags.get("input_partition_dims", ["1"]))
    steps = 118287 // batch
    return dict(
        replicas=int(flag(flags, "num_shards")), spatial_ways=ways, train_batch=batch,
        optimizer="momentum", grad_dtype="fp32", bn_group_cores=None, steps_per_loop=steps,
        framework="TF1", update="unknown", update_source=update_unknown(cross_shard("mask_rcnn_model.py")),
        timing=dict(style="period", marker="block_stop", file="mask_rcnn_main.py", steps=steps,
                    wait_from="block_start",
                    eval_examples=(math.ceil(eval_samples / eval_batch) + 1) * eval_batch, success_only=True,
                    eval_what="on-device inference on {e} padded val images (~{s} by image count; "
                              "proposal/NMS/mask-head work makes that uncertain)",
                    writer="written after the host has read the block's last eval outfeed, before COCO scoring"),
        code=[main, params, model, runner])


def cfg_gnmt(snap, sub, flags, impl):
    runner, est, model, nmt = (f"{impl}/low_level_runner.py", f"{impl}/estimator.py",
                               f"{impl}/model.py", f"{impl}/nmt.py")
    require(snap, runner, r"def train_eval_step\(\):\s*with tf\.control_dependencies\(train_loop\(\)\):\s*return "
                          r"eval_loop\(\)",
            "one device program: train loop, then decode loop")
    require(snap, runner, r"predictions = list\(self\.predict\(\)\)\s*mlp_log\.mlperf_print\(\s*\"eval_start\"",
            "eval_start written right after the host has read all of a block's decode outputs")
    require(snap, est, r"steps_per_epoch = int\(hparams\.num_examples_per_epoch/hparams\.batch_size\)",
            "one device loop = int(num_examples_per_epoch / batch_size) steps")
    require(snap, model, r"tf\.tpu\.cross_replica_sum\(tf\.cast\(g, tf\.bfloat16\)\)", "gradients summed in bfloat16")
    require(snap, model, r"self\.update = opt\.apply_gradients\(gradients", "the optimizer applied on every replica")
    require(snap, nmt, r'"--optimizer", type=str, default="adam"', "Adam as the optimizer default")
    if flag(flags, "activation_dtype") != "bfloat16":
        raise SystemExit("gnmt: activation_dtype is not bfloat16")
    batch = int(flag(flags, "batch_size"))
    spl = int(int(flag(flags, "num_examples_per_epoch")) / batch)
    return dict(
        replicas=int(flag(flags, "num_shards")), spatial_ways=1, train_batch=batch, optimizer="adam",
        grad_dtype="bf16", bn_group_cores=None, steps_per_loop=spl, framework="TF1", update="unknown",
        update_source=update_unknown(
            "model.py sums the gradients with tf.tpu.cross_replica_sum (in bfloat16) and applies Adam "
            "on every replica, i.e. all-reduce + replicated update in the graph"),
        timing=dict(style="period", marker="eval_start", file="low_level_runner.py", steps=spl,
                    wait_from="block_start",
                    eval_what="the on-device beam-search decode of the 3003-sentence eval set",
                    writer="written right after the host has read a block's decode outputs"),
        code=[runner, est, model, nmt])


SUBMISSIONS = [
    ("resnet", "tpu-v3-32-TF2.0", cfg_resnet_tf2),
    ("resnet", "tpu-v3-8192-TF", cfg_resnet_tf1),
    ("resnet", "tpu-v3-8192-JAX", cfg_resnet_jax),
    ("bert", "tpu-v3-32-TF2.0", cfg_bert_tf2),
    ("bert", "tpu-v3-8192-TF", cfg_bert_tf1),
    ("bert", "tpu-v3-8192-JAX", cfg_bert_jax),
    ("transformer", "tpu-v3-8192-TF", cfg_transformer_lingvo),
    ("ssd", "tpu-v3-8192-TF", cfg_ssd_tf1),
    ("maskrcnn", "tpu-v3-1024-TF", cfg_mask),
    ("gnmt", "tpu-v3-1024-TF", cfg_gnmt),
]


def check_skipped(snap):
    """The skipped submissions' reasons still hold at the pinned commit."""
    tr = f"{B}/transformer/tpu-v3-8192-JAX/run_and_time.sh"
    if parse_flags(snap.show(tr)):
        raise SystemExit(f"{tr}: now has flags; revisit the skipped Transformer JAX row")
    train = f"{IMPL[('transformer', 'tpu-v3-8192-JAX')]}/train.py"
    require(snap, train, r"'num_partitions', default=1", "num_partitions defaulting to 1")
    require(snap, train, r"batch_size = min\(16 \* jax\.device_count\(\) // num_partitions, 2048\)",
                         "the default batch")
    require(snap, train, r"device_train_input_shape = \(batch_size // \(num_replicas \* jax\.host_count\(\)\),",
            "per-device batch = batch // (local replicas x hosts)")
    ssd = f"{IMPL[('ssd', 'tpu-v3-4096-JAX')]}/ssd_train.py"
    require(snap, ssd, r"epoch_id = epoch_id % jax\.host_count\(\)\s*if host_id == epoch_id:\s*coco_thread\.submit",
            "each eval scored (and its eval_accuracy written) by host epoch_id % host_count")
    require(snap, ssd, r"coco_metric\.compute_map\(.*?mlp_log\.mlperf_print\(\s*'eval_accuracy'",
            "eval_accuracy written after COCO scoring")
    require(snap, ssd, r"while int\(host_step // params\['steps_per_epoch'\]\) == epoch:.*?infeed_pool\.submit.*?"
            r"mlp_log\.mlperf_print\(\s*'block_stop'", "block_stop written after the host queued an epoch's infeed")


# ------------------------------------------------------------------ timing
def marker_times(events, key, file_suffix):
    out = [(t, m) for t, k, _, m in events if k == key]
    for _, m in out:
        if not str(m.get("file", "")).endswith(file_suffix):
            raise SystemExit(f"{key} logged from {m.get('file')}, expected {file_suffix}")
    return out


def one(events, key):
    vals = [t for t, k, _, _ in events if k == key]
    if len(vals) != 1:
        raise SystemExit(f"log with {len(vals)} {key} lines")
    return vals[0]


def run_blocks(cfg, events):
    """(steady [(steps, duration s)], notes) of one run; block 1 (warm-up) is excluded."""
    tm = cfg["timing"]
    notes = {}
    if tm["style"] == "train_only":
        starts = [t for t, _ in marker_times(events, tm["start"], tm["file"])]
        ends = [t for t, _ in marker_times(events, tm["end"], tm["file"])]
        # block k+1's training runs from eval_accuracy k to eval_start k+1 (block 1: run_start ->
        # eval_start 1, shorter and with warm-up: not used)
        pairs = list(zip(starts, ends[1:]))
        if not pairs or any(e <= s for s, e in pairs):
            raise SystemExit(f"{tm['start']} / {tm['end']} lines out of order or fewer than two blocks")
        epochs = [m["epoch_num"] for _, m in marker_times(events, tm["end"], tm["file"])]
        if {b - a for a, b in zip(epochs, epochs[1:])} != {tm["epochs"]}:
            raise SystemExit(f"{tm['end']} lines not {tm['epochs']} epochs apart: {epochs}")
        return [(tm["steps"], e - s) for s, e in pairs], notes
    marks = marker_times(events, tm["marker"], tm["file"])
    edges = [(one(events, "run_start"), {})] + marks
    blocks = []      # (steps, duration, keys written inside, host-wait share or None)
    for (a, _), (b, _) in zip(edges, edges[1:]):
        inside = {k for t, k, _, _ in events if a < t < b}
        wait = None
        if tm.get("wait_from"):
            # share of the block the host spent waiting for the device's outfeed: from the last
            # wait_from stamp (written just before the host starts to wait) to the block's end
            w = [t for t, k, _, _ in events if k == tm["wait_from"] and a <= t < b]
            wait = (b - max(w)) / (b - a) if w else None
        blocks.append((tm["steps"], b - a, inside, wait))
    if tm.get("steps_metadata"):
        # BERT logs count "epochs" in steps: consecutive markers must be `steps` apart
        nums = [m.get("epoch_num", m.get("first_epoch_num")) for _, m in marks]
        gaps = {b - a for a, b in zip(nums, nums[1:])}
        if gaps != {tm["steps"]}:
            raise SystemExit(f"{tm['marker']} steps apart {sorted(gaps)}, expected {tm['steps']}")
    steady = blocks[1:]
    if tm["style"] == "period_no_eval":
        notes["eval_dropped"] = sum(tm["skip_if"] in blk[2] for blk in steady)
        steady = [blk for blk in steady if tm["skip_if"] not in blk[2]]
    if tm.get("catch_up"):
        med = statistics.median(blk[1] for blk in steady)
        lead = 0
        for i, blk in enumerate(steady):
            if blk[1] < CATCH_UP * med:
                lead = i + 1
            else:
                break
        notes["catch_up"] = lead
        steady = steady[lead:]
    if tm.get("wait_from"):
        notes["waits"] = [blk[3] for blk in steady if blk[3] is not None]
    steady = [(blk[0], blk[1]) for blk in steady]
    if len(steady) < 2:
        raise SystemExit("fewer than two steady blocks")
    return steady, notes


def per_run(cfg, events):
    steady, notes = run_blocks(cfg, events)
    return dict(step=statistics.median(d / s for s, d in steady), blocks=len(steady), **notes)


def span(values):
    lo, hi = min(values), max(values)
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def method_text(bench, cfg, runs, excluded):
    tm = cfg["timing"]
    fw = cfg["framework"]
    head = f"framework={fw}; " + (f"{cfg['framework_note']}; " if cfg.get("framework_note") else "")
    nblocks = span([r["blocks"] for r in runs])
    ex = "".join(f"; {e}" for e in excluded)
    if tm["style"] == "train_only":
        return ("exact", head +
                f"per run, median over blocks 2 onward ({nblocks} blocks) of (eval_start of block k+1 - "
                f"eval_accuracy of block k) / {tm['steps']} steps ({tm['loops']} host loops of "
                f"{cfg['steps_per_loop']}); eval_accuracy is written after float(test_accuracy.result()) "
                f"and eval_start after the controller read global_step.numpy() following the last train "
                f"loop, both device syncs, so the interval holds training only (plus the host gaps "
                f"between its loops); the eval (eval_start -> eval_accuracy) is outside it; row = median "
                f"over runs" + ex)
    if tm["style"] == "period_no_eval":
        dropped = span([r["eval_dropped"] for r in runs])
        return ("exact", head +
                f"per run, median over blocks 2 onward ({nblocks} blocks) of (time between consecutive "
                f"block_stop lines) / {tm['steps']} steps (one host loop); block_stop is written after "
                f"reading the train loss metric, a device sync; the eval runs only after the loop that "
                f"reaches steps_before_eval_start, and the {dropped} interval(s) per run that contain an "
                f"eval_start are dropped, so the intervals hold training only (plus ~0.1 s of host "
                f"work between loops); row = median over runs" + ex)
    what = tm["eval_what"]
    if "eval_examples" in tm:
        share = eval_share(tm["eval_examples"], tm["steps"], cfg["train_batch"])
        what = what.format(e=tm["eval_examples"], s=pct(share))
    extra = ""
    if tm.get("catch_up"):
        extra = (f"; leading blocks shorter than {CATCH_UP} x the run's median ({span([r['catch_up'] for r in runs])} "
                 f"per run) are dropped: block 1's boundary was written late, after the device had already "
                 f"queued several blocks' outfeed, which the host then read back to back")
    if tm.get("wait_from"):
        waits = [w for r in runs for w in r["waits"]]
        extra += (f"; the host was waiting for this outfeed (from its last {tm['wait_from']} line to the "
                  f"block's end) for a median {100 * statistics.median(waits):.0f}% (min "
                  f"{100 * min(waits):.0f}%) of each block, so each block's end was set by the device, not the host")
    first = ("; block 1 (run_start to the first marker) holds warm-up and is excluded")
    if bench == "bert" and cfg["framework"] == "JAX":
        first = ("; block 1 (run_start to the first eval_accuracy) is one 6 x 62 = 372-step device loop "
                 "plus warm-up and is excluded")
    return ("bound", head +
            f"per run, median over blocks 2 onward ({nblocks} blocks) of (time between consecutive "
            f"{tm['marker']} lines, {tm['writer']}) / {tm['steps']} steps; every block of equal length "
            f"also holds {what}, which cannot be separated{first}{extra}; row = median over runs" + ex)


def build_rows(snap):
    # every tpu-v3 submission with logs must be tabulated or skipped with a reason
    have = set()
    for system in snap.tpu_v3_dirs("Google/results"):
        for bench in snap._git("ls-tree", "--name-only", f"{snap.commit}:Google/results/{system}").stdout.split():
            have.add((bench, system))
    known = {(b, s) for b, s, _ in SUBMISSIONS} | set(SKIPPED)
    if have != known:
        raise SystemExit(f"tpu-v3 submissions with logs changed: new {sorted(have - known)}, "
                         f"gone {sorted(known - have)}")
    check_skipped(snap)
    rows = []
    order = {b: i for i, b in enumerate(BENCH_ORDER)}
    for bench, system, fn in sorted(SUBMISSIONS, key=lambda x: (order[x[0]], int(x[1].split("-")[2]), x[1])):
        cores = int(system.split("-")[2])
        topo = f"tpu-v3-{cores}"
        script = f"{B}/{bench}/{system}/run_and_time.sh"
        flags = parse_flags(snap.show(script))
        cfg = fn(snap, system, flags, IMPL[(bench, system)])
        if cfg["replicas"] is None:
            cfg["replicas"] = cores
        if cfg["replicas"] * cfg["spatial_ways"] != cores:
            raise SystemExit(f"{bench} {system}: {cfg['replicas']} replicas x {cfg['spatial_ways']} != {cores} cores")
        if cfg.get("hosts") and cfg["hosts"] * cfg["chips"] * 2 != cores:
            raise SystemExit(f"{bench} {system}: deepsea bounds do not give {cores} cores")
        logs = snap.ls(f"Google/results/{system}/{bench}")
        logs = [p for p in logs if re.fullmatch(rf"Google/results/{system}/{bench}/result_\d+\.txt", p)]
        nums = sorted(int(re.search(r"result_(\d+)", p)[1]) for p in logs)
        if nums != list(range(len(nums))):
            raise SystemExit(f"{bench} {system}: result files not numbered 0..N-1")
        used, runs, batches, spans, excluded = [], [], [], [], []
        for n in nums:
            path = f"Google/results/{system}/{bench}/result_{n}.txt"
            events, comments = parse_log(snap.show(path))
            plats = {str(v) for _, k, v, _ in events if k == "submission_platform"}
            if {re.sub(r"(?i)^tpu-?v3-", "tpu-v3-", p) for p in plats} != {topo}:
                raise SystemExit(f"{path}: submission_platform {sorted(plats)}")
            status = [m.get("status") for _, k, _, m in events if k == "run_stop"]
            if cfg["timing"].get("drop_commented") and comments:
                excluded.append(f"result_{n} excluded: its first line reads {comments[0][1:].strip()!r} "
                                f"(its run_start was altered by the submitter)")
                continue
            if cfg["timing"].get("success_only") and status != ["success"]:
                excluded.append(f"result_{n} excluded: run_stop status {status} (eval accuracy collapsed; "
                                f"a diverged model's eval does different work)")
                continue
            batches.append(only([v for _, k, v, _ in events if k == "global_batch_size"], path))
            spans += [v for _, k, v, _ in events if k == "model_bn_span"]
            runs.append(per_run(cfg, events))
            used.append(n)
        global_batch = only(batches, f"{bench} {system} global_batch_size")
        if global_batch != cfg["train_batch"]:
            raise SystemExit(f"{bench} {system}: log batch {global_batch} != flags {cfg['train_batch']}")
        if global_batch % cfg["replicas"]:
            raise SystemExit(f"{bench} {system}: batch {global_batch} not divisible by replicas")
        prb = global_batch // cfg["replicas"]
        bn = cfg["bn_group_cores"]
        if spans:
            span_v = only(spans, f"{bench} {system} model_bn_span")
            if bn == "from_log":
                bn = span_v // prb if span_v > prb else None
            elif span_v != prb * ((bn // cfg["spatial_ways"]) if bn else 1):
                raise SystemExit(f"{bench} {system}: model_bn_span {span_v} disagrees with groups {bn}")
        if bn == "from_log":
            raise SystemExit(f"{bench} {system}: no model_bn_span in the logs")
        kind, method = method_text(bench, cfg, runs, excluded)
        steps = [r["step"] for r in runs]
        lo, hi, med = min(steps), max(steps), statistics.median(steps)
        rng = f"{used[0]}-{used[-1]}" if used == list(range(used[0], used[-1] + 1)) else ",".join(map(str, used))
        sources = [f"Google/results/{system}/{bench}/result_[{rng}].txt", script] + cfg["code"]
        rows.append({
            "benchmark": bench, "workload": WORKLOAD[bench], "topology": topo, "cores": cores,
            "replicas": cfg["replicas"], "spatial_ways": cfg["spatial_ways"],
            "global_batch": global_batch, "per_replica_batch": prb,
            "optimizer": cfg["optimizer"], "precision": PRECISION,
            "grad_allreduce_dtype": cfg["grad_dtype"], "bn_group_cores": "" if bn is None else bn,
            "steps_per_loop": cfg["steps_per_loop"], "eval_on_device": "true",
            "update": cfg["update"], "update_source": cfg["update_source"],
            "measured_step_s": fmt(med), "step_s_min": fmt(lo), "step_s_max": fmt(hi),
            "runs": len(used), "kind": kind, "method": method, "sources": "; ".join(sources),
            "round": ROUND, "framework": cfg["framework"].lower(),
        })
    return rows


def render(rows):
    return render_csv(COLUMNS, rows)


def main(argv=None):
    return generator_main(argv, description=__doc__.splitlines()[0], snapshot=DEFAULT_SNAPSHOT, upstream=UPSTREAM,
                          pinned=PINNED[:12], out=OUT, build=lambda repo: render(build_rows(Snapshot(repo))),
                          tool="tests/tools/regenerate_mlperf_v07.py")


if __name__ == "__main__":
    sys.exit(main())
