"""A toy workload file with round sizes, for tests that derive every figure by hand.

Writes the YAML a user would (docs/formats/workload.md) and loads it, so the toy goes
through the same loader and checks as a shipped workload.
"""

from wus_sim.model.workload_files import load_workload

__all__ = ["toy_yaml", "make", "make_moe", "MOE_TOY", "make_tiny_llama", "TINY_LLAMA"]


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


MOE_TOY = dict(h=1024, vocab=2048, ff=2048, experts=8, top_k=2, moe_layers=2)
"""The sizes of :func:`make_moe`: hidden 1024, vocabulary 2048, expert width 2048, 8 routed experts
a MoE layer, each token to 2 of them, two MoE layers."""


def make_moe(folder, name="moe-toy", *, top_k=MOE_TOY["top_k"], optimizer="adam", stacked=False):
    """A toy mixture of experts (one token an example): an embedding [2048, 1024], two MoE layers each
    with a router ``gate`` [1024, 8] and 8 routed experts ``experts.<j>.w1`` [1024, 2048] and
    ``w2`` [2048, 1024], a head [1024, 2048]; a MoE layer's FLOPs per token are 2 x (router + *top_k*
    experts' elements) (what the importers count); the head's 2 x its elements. *stacked*: each
    layer's experts in one tensor per weight, ``experts.w1`` [1024, 8 x 2048] and ``experts.w2``
    [2048, 8 x 1024] (stacked along the output features, the last axis of this in_out layout)."""
    h, v, ff, n = MOE_TOY["h"], MOE_TOY["vocab"], MOE_TOY["ff"], MOE_TOY["experts"]
    layers = [("embed", 0)]
    tensors = [("embed.weight", [v, h], 0)]
    for i in (1, 2):
        layers.append((f"moe{i}", 2 * (h * n + top_k * 2 * h * ff)))
        tensors.append((f"moe{i}.gate.weight", [h, n], i))
        if stacked:
            tensors += [(f"moe{i}.experts.w1.weight", [h, n * ff], i), (f"moe{i}.experts.w2.weight", [ff, n * h], i)]
        for j in range(0 if stacked else n):
            tensors += [(f"moe{i}.experts.{j}.w1.weight", [h, ff], i), (f"moe{i}.experts.{j}.w2.weight", [ff, h], i)]
    layers.append(("head", 2 * h * v))
    tensors.append(("head.weight", [h, v], 3))
    params = sum(a * b for _, (a, b), _ in tensors)
    return make(folder, name, "toy mixture of experts", params=params, layers=layers, tensors=tensors,
                optimizer=optimizer)


TINY_LLAMA = dict(hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2,
                  num_hidden_layers=2, vocab_size=1024)
"""A tiny Llama (:func:`make_tiny_llama`): 4 query heads of 64, 2 KV heads (kv width 128), 2 decoder layers."""


def make_tiny_llama(folder, tokens=4096):
    """The tiny Llama imported at *tokens* tokens a sequence: tests/data/hf_configs/llama3-8b.json's keys with
    the sizes :data:`TINY_LLAMA`, through the Hugging Face importer, into *folder*."""
    import json
    import os

    from wus_sim.model.importers.importers import import_workload

    with open(os.path.join(os.path.dirname(__file__), "..", "data", "hf_configs", "llama3-8b.json")) as f:
        cfg = json.load(f)
    cfg.update(TINY_LLAMA)
    src, out = folder / "tiny.json", folder / f"tiny-{tokens}.yaml"
    src.write_text(json.dumps(cfg))
    import_workload(str(src), name="tiny", out=str(out), sequence_length=tokens)
    return load_workload(str(out))
