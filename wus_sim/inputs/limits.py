"""Declared limits on input sizes: one place, checked before anything is allocated.

Every limit here guards a quantity a user controls (a file's size, a YAML's
nesting, a slice's chips, pipelining chunks, simulated steps, sweep points, an
optimizer program's size) and that, unbounded, turns a typo into minutes of
work or gigabytes of memory. Each is far above what the shipped inputs use
(largest: torus:128x128 in the benchmark, 16,384 chips; 24-point sweeps;
optimizer programs of under 30 statements of under 200 characters), so a
limit only stops input that could not have been meant. :func:`check_limit`
raises the one-line error, with the estimate, that names what to change.

Why these numbers: the SimPy engine handles 2e5-1e6 message hops per second
on one core and about 400 B each, so :data:`MAX_MESSAGE_HOPS` keeps one collective
under about 10 s and 1 GB; the fast engine's arrays are O(chips) per step, so :data:`MAX_CHIPS`
(a 256x256 torus) keeps them in tens of MiB.
"""

from .errors import ConfigError

__all__ = [
    "MAX_FILE_BYTES", "MAX_YAML_DEPTH", "MAX_YAML_NODES", "MAX_CHIPS", "MAX_REPLICAS",
    "MAX_CHUNKS", "MAX_STEPS", "MAX_SWEEP_POINTS", "MAX_STATEMENTS", "MAX_STATEMENT_CHARS",
    "MAX_EXPR_DEPTH", "MAX_SIZE_BYTES", "MAX_MESSAGE_HOPS", "MAX_WHOLE_NUMBER", "MAX_TENSOR_DIMS",
    "MAX_JSON_DEPTH", "MAX_JSON_INT_DIGITS", "IMPORT_MAX", "MAX_IMPORT_LAYERS", "MAX_HEADER_BYTES",
    "MAX_CHECKPOINT_TENSORS", "RATE_RANGES", "MAX_SLOW_FACTOR", "check_limit",
]


MAX_FILE_BYTES = 2 * 2**20
"""Largest input file read (YAML specs): the biggest shipped workload is under 100 KiB."""
MAX_YAML_DEPTH = 40
"""Deepest nesting of lists and mappings in a YAML file (shipped files: 4)."""
MAX_YAML_NODES = 100_000
"""Most YAML nodes (scalars, lists, mappings) in one file: PyYAML composes about 40,000 a
second, so this is at most a few seconds (the largest shipped file, bert-large, has 2,441)."""
MAX_CHIPS = 65_536
"""Most chips in a slice (a 256x256 torus; the largest TPU pod modelled is 4,096 chips)."""
MAX_REPLICAS = 131_072
"""Most replicas in a slice (chips x cores per chip)."""
MAX_CHUNKS = 1024
"""Most pipelined pieces per collective step (``--chunks``)."""
MAX_STEPS = 100
"""Most consecutive training steps simulated per point (the period settles after 2-3)."""
MAX_SWEEP_POINTS = 1_000_000
"""Most points in one experiment's sweep (counted before anything is expanded)."""
MAX_STATEMENTS = 1000
"""Most statements in one optimizer program (shipped: under 30)."""
MAX_STATEMENT_CHARS = 2000
"""Longest optimizer statement, in characters."""
MAX_EXPR_DEPTH = 60
"""Deepest nesting of one optimizer expression (operators, calls, unary minus)."""
MAX_SIZE_BYTES = 2**50
"""Largest buffer size accepted (``--size``): 1 PiB, a million times a TPU's HBM."""
MAX_MESSAGE_HOPS = 2_000_000
"""Most message hops the SimPy engine simulates in one collective (bounded from the plan
before it is compiled). Measured: a ring all-reduce on mesh:32x32 (2.1 million hops) took
10.4 s and 912 MB; halving-doubling on torus:64x64 (1.03 million hops) 2.7 s and 117 MB.
So at most about 10 s and 900 MB."""

MAX_WHOLE_NUMBER = 2**53
"""Largest whole number any input file may hold where its key declares no smaller maximum: the
largest a float holds exactly. A larger one (a 400-digit integer) cannot become a float
(OverflowError) or a numpy integer; every count in the model is far below it."""
MAX_TENSOR_DIMS = 8
"""Most dimensions of one tensor shape in a workload file (shipped: 4)."""

MAX_JSON_DEPTH = 40
"""Deepest nesting of lists and objects in a JSON input (config.json: 3; safetensors headers: 3)."""
MAX_JSON_INT_DIGITS = 20
"""Most digits of one JSON integer (2^64 has 20; a safetensors offset of a 1 TB file has 13)."""

# ---- imported models (wus-sim import-workload): each maximum is several times the largest
# public configuration of a dense transformer, so a real model never reaches it:
# Llama 3.1 405B (huggingface.co/meta-llama/Llama-3.1-405B, config.json: 126 layers, hidden 16384,
# intermediate 53248, 128 heads, vocab 128256, 131072 positions); PaLM 540B (Chowdhery et al. 2022,
# arXiv 2204.02311, table 1: 118 layers, d_model 18432, 48 heads, d_ff 73728, vocab 256k);
# Megatron-Turing NLG 530B (Smith et al. 2022, arXiv 2201.11990: 105 layers, hidden 20480, 128 heads);
# Gemma (vocab 256000); Llama 4 Scout (10,485,760 positions: the longest public context).
MAX_IMPORT_LAYERS = 1024
"""Most transformer blocks of an imported model (largest public: 126, Llama 3.1 405B)."""
IMPORT_MAX = {
    "layers": (MAX_IMPORT_LAYERS, "blocks (largest public: 126, Llama 3.1 405B)"),
    "width": (2**17, "a hidden width (largest public: 20480, Megatron-Turing NLG 530B)"),
    "ff": (2**19, "an MLP width (largest public: 73728, PaLM 540B)"),
    "heads": (2**12, "attention heads (largest public: 128, Llama 3.1 405B)"),
    "vocab": (2**21, "a vocabulary (largest public: 256,000, Gemma and PaLM)"),
    "positions": (2**24, "positions (largest public: 10,485,760, Llama 4 Scout)"),
    "experts": (2**12, "experts (largest public: 256 routed, DeepSeek-V3)"),
    "rank": (2**17, "a latent rank (largest public: 1,536, DeepSeek-V3's q_lora_rank)"),
    "image": (2**16, "an image side in pixels (518 in DINOv2's ViT-g/14)"),
    "labels": (2**21, "classes of a classifier head (ImageNet-21k: 21,843)"),
    "buckets": (2**12, "relative-position buckets (T5: 32)"),
}
"""``{kind: (maximum, what it bounds)}`` for the size keys of an imported config.json; the
importer maps each family's key names (``num_hidden_layers``, ``n_layer``, ...) to a kind."""
MAX_HEADER_BYTES = 8 * 2**20
"""Largest safetensors header read: 8 MiB (Llama 3.1 405B's largest shard header is under
100 KiB; parsing a header takes about 20x its size in memory, so at most about 200 MB)."""
MAX_CHECKPOINT_TENSORS = 65_536
"""Most tensors in one checkpoint, over all its shards (Llama 3.1 405B: 1,137)."""

# ---- physical ranges of rates: each minimum keeps every simulated time finite, non-negative and
# exact to well under a microsecond. A step adds times of ~1e-6 s (a hop) to times that grow as
# 1 / rate; a double keeps 16 digits, so a rate 10^15 times too slow (1e-15 GB/s) made a 30 us
# forward pass come out -30 us (measured: step ncf -t torus:4x4 --link-GBps 1e-15), and 1e-300
# overflowed to infinity. At the minima below the slowest time is about 10^9 s (a 1 PiB buffer
# at 1 MB/s), nine orders of magnitude inside what a double represents next to a microsecond.
RATE_RANGES = {
    "link_GBps": (1e-3, 1e6, "GB/s", "an ICI link (slowest real: 1.25 MB/s, 10 Mb/s Ethernet)"),
    "dcn_GBps": (1e-3, 1e6, "GB/s", "the data-center network per chip"),
    "onchip_GBps": (1e-3, 1e7, "GB/s", "core-to-core bandwidth in a chip"),
    "hbm_GBps": (1e-3, 1e7, "GB/s", "HBM bandwidth"),
    "peak_bf16_TFLOPs": (1e-3, 1e6, "TFLOP/s", "a chip's matrix-unit peak (TPU v5p: 459)"),
    "hbm_GiB": (1e-3, 1e6, "GiB", "a chip's HBM"),
    "mxu_efficiency": (1e-3, 1.0, "", "the share of peak the matrix units reach"),
}
"""``{key: (minimum, maximum, unit, what)}``: the declared range of every rate and capacity a
file, option or API argument sets (chips.yaml, topology files, ``--link-GBps``, ``--dcn-GBps``,
``mxu_efficiency``, ``load_topology(link_GBps=...)``)."""
MAX_SLOW_FACTOR = 1e6
"""Largest FACTOR of ``slow_links`` (a cable at its bandwidth / 10^6: at the minimum link
bandwidth, 10^-9 GB/s, still far from where times lose their microseconds, 10^-15)."""


def check_limit(what, estimate, limit, *, key_path=None, file=None, hint=""):
    """Raise a ConfigError if *estimate* exceeds *limit*; the message carries both."""
    if estimate > limit:
        rule = f"{what} would be {_num(estimate)}, over the limit of {_num(limit)}"
        raise ConfigError(rule + (f"; {hint}" if hint else ""), key_path=key_path, file=file)


def _num(x):
    x = int(x)
    # str() of an int over 4,300 digits raises; the bit length gives the magnitude instead.
    return f"{x:,}" if x < 10**15 else f"about 10^{int(x.bit_length() * 0.30103)}"
