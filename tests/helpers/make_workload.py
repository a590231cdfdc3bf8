"""A toy workload file with round sizes, for tests that derive every figure by hand.

Writes the YAML a user would (docs/formats/workload.md) and loads it, so the toy goes
through the same loader and checks as a shipped workload.
"""

from wus_sim.model.workload_files import load_workload

__all__ = ["toy_yaml", "make"]


def toy_yaml(name, description, *, params, layers, tensors, unit="example", optimizer="sgd", batch=1):
    """Workload YAML: *layers* ``[(name, fwd FLOPs per unit)]``, *tensors*
    ``[(name, shape, layer)]``; FLOPs per unit are the layers' sum; 1000 bf16 activation
    elements per example."""
    rows = lambda items: "\n".join(f"  - {list(item)!r}".replace("'", '"') for item in items)  # noqa: E731
    return f"""\
name: {name}
description: "{description}"
params: {params}
fwd_flops:
  per_unit: {sum(f for _, f in layers)}
  unit: "{unit}"
  units_per_example: 1
  example_unit: "{unit}"
activation_memory:
  - what: "per example"
    elements: 1000
    bytes_per_element: 2
    why: "test"
dtypes:
  weights: float32
  gradients: float32
  slots: float32
  activations: bfloat16
default_optimizer: {optimizer}
default_per_replica_batch: {batch}
mlperf_v06_tpu: []
layers:
{rows(layers)}
tensors:
{rows(tensors)}
"""


def make(folder, *args, **kw):
    """Write :func:`toy_yaml` to *folder* and load it."""
    path = folder / f"{args[0]}.yaml"
    path.write_text(toy_yaml(*args, **kw))
    return load_workload(str(path))
