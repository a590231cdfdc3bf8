"""MaxText's remat policies by name: which of a decoder block's named activations each saves on
the device, offloads to host memory or recomputes (the names and the parsing; what they cost is
:mod:`wus_sim.model.layer_stack`'s, which re-exports these names)."""

from ...inputs.errors import ConfigError

__all__ = ["REMAT_POLICIES", "POLICY_TENSORS", "CUSTOM_TENSORS", "CUSTOM_PLACES", "policy_tensors",
           "canonical_policy", "check_remat_policy", "ATTENTION_TENSORS", "MLP_TENSORS"]

REMAT_POLICIES = ("minimal", "save_dot_except_mlpwi", "save_dot_except_mlp", "save_qkv_proj", "save_out_proj",
                  "qkv_proj_offloaded", "minimal_offloaded", "full")
"""MaxText's ``remat_policy`` values the model knows (src/maxtext/layers/decoders.py,
``get_remat_policy``; docs/guides/optimization/benchmark_and_performance.md lists them fastest to
slowest). ``full`` saves nothing but the layer input: our ``remat: layer``."""

ATTENTION_TENSORS = ("query_proj", "key_proj", "value_proj", "out_proj")
MLP_TENSORS = ("mlpwi_0", "mlpwi_1", "mlpwo")
_QKV = ("query_proj", "key_proj", "value_proj")

POLICY_TENSORS = {
    "minimal": (ATTENTION_TENSORS + MLP_TENSORS, ()),
    "save_dot_except_mlpwi": (ATTENTION_TENSORS + ("mlpwo",), ()),
    "save_dot_except_mlp": (ATTENTION_TENSORS, ()),
    "save_qkv_proj": (_QKV, ()),
    "save_out_proj": (("out_proj",), ()),
    "qkv_proj_offloaded": ((), _QKV),
    "minimal_offloaded": ((), ATTENTION_TENSORS + MLP_TENSORS),
    "full": ((), ()),
}
"""Policy -> ``(names saved on the device, names offloaded to host memory)``; everything else is
recomputed in backward. The named tensors are MaxText's checkpoint names (query_proj, key_proj,
value_proj and out_proj in src/maxtext/layers/attentions.py; mlpwi_0, mlpwi_1 and mlpwo in
src/maxtext/layers/linears.py); the policies' lists are decoders.py's ``get_remat_policy`` and
maxtext_utils.py's ``get_save_and_offload_names``. The attention output (``context``) is saved by
none of them, so the attention kernel reruns in backward under each. Every policy keeps the
block's input (``decoder_layer_input``) on the device: it is the argument of the remat-wrapped
block, the scan's carry."""


def check_remat_policy(remat, remat_policy):
    """A remat policy by MaxText's name replaces ``remat``: both given is an error."""
    if remat_policy is not None and remat != "none":
        raise ConfigError(f"is MaxText's name for what remat says; not with remat {remat} (give one)",
                          key_path="remat_policy", value=remat_policy)


CUSTOM_TENSORS = ("decoder_layer_input",) + ATTENTION_TENSORS + MLP_TENSORS
"""Tensors a ``custom`` policy places (MaxText's ``remat_policy: custom`` with one key per tensor,
src/maxtext/configs/types.py): each ``device`` (saved in HBM), ``offload`` (saved in host memory)
or ``remat`` (recomputed). Unnamed ones are recomputed, but the block's input, which stays on
the device unless it is offloaded (the remat-wrapped block's argument)."""
CUSTOM_PLACES = ("device", "offload", "remat")


def policy_tensors(policy):
    """``(saved on the device, offloaded, input offloaded)`` of *policy*: a name of
    :data:`REMAT_POLICIES`, or ``custom:NAME=PLACE,...`` (MaxText's custom policy: NAME one of
    :data:`CUSTOM_TENSORS`, PLACE one of device, offload, remat). A bad one is a ConfigError."""
    if not isinstance(policy, str):
        raise ConfigError(f"must be one of {', '.join(REMAT_POLICIES)} or custom:NAME=PLACE,...",
                          key_path="remat_policy", value=policy)
    if policy in POLICY_TENSORS:
        saved, offloaded = POLICY_TENSORS[policy]
        return tuple(saved), tuple(offloaded), False
    if not policy.startswith("custom:"):
        raise ConfigError(f"must be one of {', '.join(REMAT_POLICIES)} or custom:NAME=PLACE,... (MaxText's "
                          "custom policy)", key_path="remat_policy", value=policy)
    places = {}
    for item in policy[len("custom:"):].split(","):
        name, eq, place = item.strip().partition("=")
        if not eq or name not in CUSTOM_TENSORS or place not in CUSTOM_PLACES or name in places:
            raise ConfigError(f"custom: each item NAME=PLACE once, NAME one of {', '.join(CUSTOM_TENSORS)}, "
                              f"PLACE one of {', '.join(CUSTOM_PLACES)}", key_path="remat_policy", value=item.strip())
        places[name] = place
    saved = tuple(n for n in CUSTOM_TENSORS[1:] if places.get(n) == "device")
    offloaded = tuple(n for n in CUSTOM_TENSORS[1:] if places.get(n) == "offload")
    return saved, offloaded, places.get("decoder_layer_input") == "offload"


def canonical_policy(policy):
    """*policy* as it is kept and shown: a name, or ``custom:`` with its items in
    :data:`CUSTOM_TENSORS` order and recomputed ones left out (checked: :func:`policy_tensors`)."""
    saved, offloaded, input_offloaded = policy_tensors(policy)
    if policy in POLICY_TENSORS:
        return policy
    items = [("decoder_layer_input", "offload")] if input_offloaded else []
    items += [(n, "device") for n in saved] + [(n, "offload") for n in offloaded]
    order = {n: i for i, n in enumerate(CUSTOM_TENSORS)}
    return "custom:" + ",".join(f"{n}={p}" for n, p in sorted(items, key=lambda x: order[x[0]]))
