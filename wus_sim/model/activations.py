"""Activation memory: one term of a workload's estimate, and the ways of counting it.

A workload file lists what its forward pass keeps for backward as terms (``activation_memory``),
each ``elements x bytes per element`` per example; :data:`ACTIVATION_MODELS` says which bytes per
element count: what the TPU compiler keeps after fusion, or every elementwise output.
"""

from dataclasses import dataclass

__all__ = ["ACTIVATION_MODELS", "ActivationTerm"]

ACTIVATION_MODELS = ("xla", "unfused")
"""How activation memory is counted (point key ``activation_model``):

* ``xla`` (the default): what the TPU compiler keeps for backward after fusion, each term's
  ``compiled_bytes_per_element`` where its file states one: the inputs of matmuls and of ops XLA
  does not fuse (softmax outputs, layer-norm inputs, dropout masks); elementwise chains (a norm's
  output, an activation function's output, a dropped copy) are fused into their consumer and
  recomputed in backward instead of stored (XLA's operator fusion, openxla.org/xla; the same split
  as JAX's ``checkpoint_dots`` policy, which saves matmul results and recomputes the rest,
  docs.jax.dev "Gradient checkpointing with jax.checkpoint");
* ``unfused``: every term's ``bytes_per_element`` as its file gives it, e.g. Korthikanti et al.
  2022's count for transformer layers (arXiv 2205.05198, sec. 4.1), which keeps every
  elementwise output as a GPU framework without fusion does.
"""


@dataclass(frozen=True)
class ActivationTerm:
    """One part of the activation-memory estimate: ``elements x bytes_per_element`` per example."""

    what: str
    elements: int
    bytes_per_element: float
    """The factor: bytes kept for backward per counted element (a parameter; ``why`` says where it comes from)."""
    why: str = ""
    layers: int = 0
    """Identical layers the term spans (``elements`` counts all of them; one layer's input is
    ``elements / layers`` activation elements); 0 = not per-layer, never rematerialised."""
    compiled_bytes_per_element: float = None
    """Bytes per element the TPU compiler keeps after fusion (:data:`ACTIVATION_MODELS` ``xla``);
    ``None`` = :attr:`bytes_per_element` (no fusion claimed for this term)."""
    compiled_why: str = ""
    selective_bytes_per_element: float = None
    """Bytes per counted element each layer keeps under remat ``selective`` (its input and its weight
    matmuls' outputs); ``None``: the workload does not say, and ``selective`` is an error."""
    head: bool = False
    """The term is the output head's (the logits the loss reads), after every layer: backward
    consumes and frees it first, before it reaches the layers, so it is never live together with a
    layer's rematerialised activations (the peak is the larger of the two, not their sum)."""

    @property
    def nbytes(self):
        return self.elements * self.bytes_per_element

    def bytes_per_element_under(self, model="xla"):
        """Bytes kept per element under the activation *model* (:data:`ACTIVATION_MODELS`)."""
        if model == "xla" and self.compiled_bytes_per_element is not None:
            return self.compiled_bytes_per_element
        return self.bytes_per_element
