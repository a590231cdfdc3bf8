"""A model of MaxText's library at another sequence length than its shipped workload's
(``NAME@TOKENS``, what ``--maxtext ... max_target_length=N`` runs): rebuilt from the model file the
package ships (wus_sim/data/maxtext/models/), with the shipped model's parameters and only the
parts that depend on the sequence changed.

Expected values are the shipped workload files (written by tests/tools/import_maxtext_models.py
from the same model files) and closed forms: a weight matmul does the same FLOPs per token at any
length; a causal attention layer's score and context matmuls do ``4 x query x key x heads x
head_dim`` per sequence; every activation term of the library's blocks is per token (flash
attention keeps no scores), so halving the tokens halves each term.
"""

from dataclasses import fields
import re

import pytest

from helpers.run_cli import run
from workload_sample import is_maxtext_library
from wus_sim.inputs.errors import ConfigError, UnknownNameError
from wus_sim.model.importers.maxtext_model import library_models, library_workload, resolve_workload
from wus_sim.model.workload_files import known_workloads, load_workload

LIBRARY = [n for n in known_workloads() if is_maxtext_library(n)]
"""The shipped workloads written from MaxText's model files (56, ``default`` included)."""

HF_SHIPPED = ("llama2-70b", "llama3-8b", "llama3-70b", "llama3.1-405b", "mixtral-8x7b", "mixtral-8x22b", "gpt3-175b")
"""Library names whose shipped workload is the Hugging Face import (tests/tools/import_maxtext_models.py)."""

SEQUENCE_FIELDS = {"units_per_example", "fwd_flops_per_example", "fwd_flops_per_unit", "layer_fwd_flops",
                   "activation_bytes_per_example", "activation_terms", "attention", "flops_note"}
"""The fields of a Workload that depend on the sequence length (flops_note quotes the length)."""

LABELS = {"name", "description", "sources", "path", "stack"}
"""Fields that name or describe the workload, not the model."""


def _model_fields(w):
    return {f.name: getattr(w, f.name) for f in fields(w) if f.name not in LABELS}


def test_every_shipped_library_workload_has_its_model_file_in_the_package():
    assert len(LIBRARY) == 56
    assert set(LIBRARY) | set(HF_SHIPPED) <= set(library_models())


@pytest.mark.parametrize("name", LIBRARY)
def test_rebuilt_at_the_shipped_length_is_the_shipped_workload(name):
    shipped = load_workload(name)
    rebuilt = library_workload(name, shipped.units_per_example)
    assert rebuilt.name == f"{name}@{shipped.units_per_example}"
    assert _model_fields(rebuilt) == _model_fields(shipped)


@pytest.mark.parametrize("name", LIBRARY)
def test_at_half_the_length_only_the_sequence_dependent_parts_change(name):
    shipped = load_workload(name)
    tokens = shipped.units_per_example // 2
    half = resolve_workload(f"{name}@{tokens}")
    before, after = _model_fields(shipped), _model_fields(half)
    assert {k for k in before if before[k] != after[k]} <= SEQUENCE_FIELDS
    assert half.params == shipped.params and half.tensors == shipped.tensors
    assert half.units_per_example == tokens
    # the weights' FLOPs per token do not depend on the sequence; attention's per sequence are 4 q k h d
    for w in (shipped, half):
        for a in w.attention:
            assert a.flops == 4 * a.query_tokens * a.key_tokens * a.heads * a.head_dim
    weights = [(w.fwd_flops_per_example - sum(a.flops for a in w.attention)) / w.units_per_example
               for w in (shipped, half)]
    assert weights[1] == pytest.approx(weights[0], rel=1e-12)
    for a, b in zip(shipped.attention, half.attention, strict=True):
        assert (b.layer, b.heads, b.head_dim, b.causal, b.fused) == (a.layer, a.heads, a.head_dim, a.causal, a.fused)
        assert b.query_tokens == tokens
        assert b.key_tokens == min(a.key_tokens, tokens)  # a window shorter than the sequence stays
    for a, b in zip(shipped.activation_terms, half.activation_terms, strict=True):
        # the description quotes the positions: the same words at the other length
        assert b.what == re.sub(rf"\b{shipped.units_per_example}(?= tokens| predicted positions)", str(tokens), a.what)
        assert (b.layers, b.bytes_per_element) == (a.layers, a.bytes_per_element)
        assert 2 * b.elements == a.elements


@pytest.mark.parametrize("name", HF_SHIPPED)
def test_a_model_shipped_from_hugging_face_rebuilds_with_its_parameters(name):
    """The seven names whose shipped workload is the Hugging Face import rebuild from MaxText's model
    file: the same parameters, FLOPs and activations at the shipped length (Mixtral's experts one
    tensor per weight, as MaxText holds them)."""
    shipped = load_workload(name)
    rebuilt = library_workload(name, shipped.units_per_example)
    assert rebuilt.params == shipped.params
    assert rebuilt.fwd_flops_per_example == pytest.approx(shipped.fwd_flops_per_example, rel=1e-12)
    assert rebuilt.activation_bytes_per_example == pytest.approx(shipped.activation_bytes_per_example, rel=1e-12)


@pytest.mark.parametrize("spec, error, words", [
    ("llama3.8b@8192", UnknownNameError, "did you mean"),
    ("llama3-8b@0", ConfigError, "must be a whole number in [1, 16777216]"),
    ("llama3-8b@8k", ConfigError, "must be NAME@TOKENS"),
    ("gpt3-52k@4096", ConfigError, "trainable_position_size: 2048 is below the sequence length 4096"),
])
def test_a_bad_name_at_a_length_is_one_error(spec, error, words):
    with pytest.raises(error) as exc:
        resolve_workload(spec)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_the_public_loader_reads_a_name_at_a_length():
    import wus_sim

    w = wus_sim.load_workload("llama3.1-8b@8192")
    assert w.name == "llama3.1-8b@8192" and w.units_per_example == 8192
    assert w.params == load_workload("llama3.1-8b").params
    assert wus_sim.load_workload("bert-large").name == "bert-large"


def test_a_workload_at_a_length_runs_from_the_command_line():
    rc, out, err = run("describe", "workload", "llama3.1-8b@8192")
    assert rc == 0, err
    assert "llama3.1-8b@8192" in out
    rc, out, err = run("plan", "llama3.1-8b@8192", "-t", "tpu-v6e-8", "--json")
    assert rc == 0, err
