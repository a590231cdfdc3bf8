"""Hand-written mutation run over the step model (not a test module: no ``test_`` prefix).

Applies each mutant below (one exact source replacement) to a scratch copy of the
repository, runs the fast step tests against that copy and reports KILLED (some test
failed) or SURVIVED. The first five are the breaks named in the golden-tests issue.

    python tests/tools/mutate_step.py            # all mutants
    python tests/tools/mutate_step.py a b e      # only those labels

Run from the repository root in its venv. Takes ~10 s per mutant on 2 cores.
"""

import os
from pathlib import Path
import shutil
import subprocess
import sys
import tempfile

ROOT = Path(__file__).resolve().parents[2]
TESTS = ["tests/training/test_step_golden.py", "tests/training/test_step.py", "tests/model/test_memory.py", "tests/training/update/test_strategies.py",
         "tests/model/test_compute.py", "tests/training/test_small_allreduce.py"]

# label, file, old (must occur exactly once), new, what it breaks
MUTANTS = [
    ("a", "wus_sim/training/update/strategies.py", "return self.bytes_read + self.bytes_written", "return self.bytes_read",
     "update time from bytes read only"),
    ("b", "wus_sim/training/update/strategies.py", "int(b.padded_elements * width)", "int(b.padded_elements * gb)",
     "weight all-gather timed at gradient bytes"),
    ("c", "wus_sim/training/update/strategies.py",
     'extra = [Collective("all-reduce", int(r.nbytes), r.what) for r in plan.extra_reductions]', "extra = []",
     "LAMB/LARS norm all-reduces dropped"),
    ("d1", "wus_sim/training/step.py", "per_replica_batch, options, spatial_ways=plan.spatial_ways)",
     "per_replica_batch, options, spatial_ways=1)",
     "spatial partitioning ignored in layer times"),
    ("d2", "wus_sim/model/workload.py", "return config.replicas", "return topology.num_replicas",
     "spatial partitioning ignored: one replica per core"),
    ("e", "wus_sim/model/memory.py", "gradients = shards + plan.replicated_elements * gb + reducing * gb",
     "gradients = plan.replicated_elements * gb + reducing * gb",
     "sharded gradient memory without the reduce-scatter shards"),
    # step.py
    ("s1", "wus_sim/training/step.py", "+ work.update.kernels * options.compute.op_overhead_s",
     "+ 0 * options.compute.op_overhead_s", "update kernels' fixed cost dropped"),
    ("s2", "wus_sim/training/step.py", "step_overhead_s=options.compute.step_overhead_s", "step_overhead_s=0.0",
     "step overhead dropped"),
    ("s3", "wus_sim/training/step.py", 'options.overlap_all_gather and work.strategy == "sharded"',
     'options.overlap_all_gather or work.strategy == "sharded"', "all-gather overlap forced on"),
    ("s4", "wus_sim/training/speedups.py", "return r.step_time_s / s.step_time_s", "return s.step_time_s / r.step_time_s",
     "speedup inverted"),
    ("s5", "wus_sim/training/small_allreduce.py", "STATISTICS_BYTES_PER_CHANNEL = 2 * 4", "STATISTICS_BYTES_PER_CHANNEL = 4",
     "batch-norm all-reduce half its bytes"),
    # strategies.py
    ("t1", "wus_sim/training/update/strategies.py", "kernels += terms[0]", "kernels += 1", "LARS/LAMB second pass not costed"),
    # (an all-reduce bucket is unpadded by construction, Plan.allreduce_buckets, so timing it at
    # padded_elements changes nothing: an equivalent mutant, not listed)
    ("t2", "wus_sim/training/update/strategies.py", 'if strategy == "replicated" or b.kind == "replicated":',
     'if strategy == "replicated":', "sharded: replicated tensors reduce-scattered and gathered"),
    ("t3", "wus_sim/training/update/strategies.py", 'Collective("reduce-scatter", int(b.padded_elements * gb)',
     'Collective("reduce-scatter", int(b.elements * gb)', "reduce-scatter ignores padding"),
    # memory.py
    ("m1", "wus_sim/model/memory.py", "shards = sharded_padded / n * gb\n        weights = padded",
     "shards = sharded_padded / n * wb\n        weights = padded",
     "gradient shards at weight bytes"),
    ("m2", "wus_sim/model/memory.py", 'collective = largest_ar(("replicated",)) + extra\n        details = {"weight_padding": pad * wb',
     'collective = largest_ar(("replicated",))\n        details = {"weight_padding": pad * wb',
     "sharded: extra-reduction buffers dropped"),
    ("m3", "wus_sim/model/memory.py", "* activation_scale\n                   / plan.spatial_ways", "* activation_scale",
     "activations not split over spatial ways"),
    ("m4", "wus_sim/model/memory.py", '"grad_padding": (reducing_pad + pad / n) * gb', '"grad_padding": reducing_pad * gb',
     "gradient padding without the shard's"),
    ("m5", "wus_sim/model/memory.py", "collective = max((b.elements * gb for b in plan.allreduce_buckets), default=0)",
     "collective = largest_ar((\"replicated\",))", "replicated: all-reduce buffer of the shard format's replicated buckets"),
    ("m6", "wus_sim/model/memory.py", "* spatial_activation_share(w, plan.spatial_ways))", "* 1.0)",
     "spatial: activations divided evenly, not by whole rows"),
    # compute.py
    ("c1", "wus_sim/model/compute.py", "+ 2 * per_core * act_B) / hbm_Bps", "+ per_core * act_B) / hbm_Bps",
     "backward io counts outputs once"),
    ("c2", "wus_sim/model/compute.py", "elem_bwd + p.backward_flops_ratio * p.op_overhead_s", "elem_bwd + p.op_overhead_s",
     "backward op overhead x1"),
    ("c3", "wus_sim/model/compute.py", "speedup = 1 + (ways - 1) * p.spatial_efficiency", "speedup = ways",
     "spatial efficiency ignored"),
    ("c4", "wus_sim/model/compute.py", "t_mem = nbytes / (topology.hbm_Bps_per_replica * p.update_hbm_efficiency)",
     "t_mem = nbytes / (topology.hbm_Bps_per_replica * p.activation_hbm_efficiency)",
     "update at the activation efficiency"),
    ("c5", "wus_sim/model/compute.py", "return max(t_mem, t_vec)", "return t_mem + t_vec", "update roofline summed"),
    ("c6", "wus_sim/model/ops/spatial.py", "np.where(halo > 0, topology.hop_latency_s + halo / link_Bps, 0.0)",
     "np.where(halo > 0, halo / link_Bps, 0.0)", "halo exchange without hop latency"),
    ("c7", "wus_sim/model/compute.py", "io_fwd = (weight_elems * act_B + per_core * act_B)",
     "io_fwd = (weight_elems * act_B + outputs * act_B)", "forward io output not split over cores"),
    ("r1", "wus_sim/model/compute.py", "matrix_fwd = fwd * weights / weights.sum() * share",
     "matrix_fwd = fwd * weights / weights.sum()", "spatial: matrix work divided evenly, not by whole rows"),
    ("r2", "wus_sim/model/compute.py", "per_core = (workload.layer_output_elements + scores) * per_replica_batch / ways * share",
     "per_core = (workload.layer_output_elements + scores) * per_replica_batch / ways",
     "spatial: output traffic divided evenly, not by whole rows"),
    ("r3", "wus_sim/model/ops/spatial.py", "np.ceil(side[rows] / ways) * ways / side[rows]",
     "(side[rows] / ways) * ways / side[rows]", "spatial: the busiest core's rows not rounded up"),
]


def run_one(label, path, old, new, scratch):
    src = scratch / path
    original = (ROOT / path).read_text()
    if original.count(old) != 1:
        return "NOT-APPLIED"
    src.write_text(original.replace(old, new))
    try:
        env = dict(os.environ, PYTHONPATH=str(scratch))
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-m", "not slow", "-p", "no:cacheprovider",
                               *TESTS], cwd=scratch, env=env, capture_output=True, text=True, timeout=600)
        return "SURVIVED" if proc.returncode == 0 else ("KILLED" if proc.returncode == 1 else f"ERROR rc={proc.returncode}")
    finally:
        src.write_text(original)


def main(labels):
    with tempfile.TemporaryDirectory(prefix="wus-mutate-") as tmp:
        scratch = Path(tmp) / "repo"
        shutil.copytree(ROOT, scratch, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info"))
        # the copy, not the editable install, must be what the tests import
        check = subprocess.run([sys.executable, "-c", "import wus_sim; print(wus_sim.__file__)"], cwd=scratch,
                               env=dict(os.environ, PYTHONPATH=str(scratch)), capture_output=True, text=True)
        assert check.stdout.strip().startswith(str(scratch)), check.stdout
        for label, path, old, new, what in MUTANTS:
            if labels and label not in labels:
                continue
            status = run_one(label, path, old, new, scratch)
            print(f"{label:3} {status:11} {path}: {what}", flush=True)


if __name__ == "__main__":
    main(set(sys.argv[1:]))
