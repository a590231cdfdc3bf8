"""Optimizers as small programs of per-tensor operations, and their static analysis.

``load_optimizer('adam')`` reads a YAML program; ``analyse(opt)`` derives from it
what the simulator needs (slots, HBM bytes and flops per element, cross-replica
reductions a sharded update adds). Nothing here is a hand-written table.
"""

from .analysis import (LAYOUTS, CaseAnalysis, OptimizerAnalysis, Reduction, ShardOption, analyse,
                       matrix_view)
from .describe import describe_text
from .registry import known_optimizers, known_prefixes, load_optimizer, optimizer_dirs
from .spec import Case, Optimizer, parse_optimizer

__all__ = [
    "known_optimizers", "known_prefixes", "load_optimizer", "optimizer_dirs",
    "Optimizer", "Case", "parse_optimizer",
    "analyse", "OptimizerAnalysis", "CaseAnalysis", "Reduction", "ShardOption", "LAYOUTS", "matrix_view",
    "describe_text",
]
