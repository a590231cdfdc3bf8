"""Fuzz profile of the surfaces of issue 35: the importer's config.json and safetensors header,
the strict JSON reader, and the Python API's argument types.

The contract, for every case: the call ends within its budget, and either works or raises a
:class:`~wus_sim.inputs.errors.WusError` whose message is one line of bounded length; an import
that works gives YAML that ``load_workload``'s rules accept. Cases are generated from the families
(hostile numbers, wrong kinds, nesting, duplicates, long strings), not from the issue's list. The
normal suite runs a reduced profile; ``-m slow`` the full one (``WUS_SIM_FUZZ_EXAMPLES``).
"""

import json
import math
import struct

from hypothesis import HealthCheck, given, settings, strategies as st
import numpy as np
import pytest

from test_fuzz import FUZZ_FULL_EXAMPLES, FUZZ_REDUCED_EXAMPLES
from test_fuzz_boundary import _within
import wus_sim
from wus_sim.inputs.errors import WusError
from wus_sim.inputs.strict_json import loads_strict
from wus_sim.model.importers.importers import import_workload
from wus_sim.model.workload_files import workload_from_text

_SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None)
BUDGET_S = 5

BASE = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 32}
KEYS = sorted({*BASE, "num_key_value_heads", "head_dim", "attention_dropout", "tie_word_embeddings",
               "sliding_window", "n_embd", "n_layer", "n_head", "n_positions", "architectures", "_name_or_path",
               "attn_pdrop", "hidden_dropout_prob", "type_vocab_size"})
FAMILIES = ["llama", "mistral", "qwen2", "gemma", "gpt2", "gpt_neox", "bert"]

# JSON text of hostile values: what a JSON file can hold and Python's json turns into trouble
HOSTILE = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e-400", "9" * 30, "-" + "9" * 30,
           str(2**63), str(2**53 + 1), "0", "-1", "1.5", "true", "null", '"64"', '"\\ud800"', "[]", "{}",
           "[" * 60 + "]" * 60, '"' + "x" * 5000 + '"']

values = st.one_of(
    st.integers(min_value=-2**70, max_value=2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(HOSTILE),
    st.text(max_size=20).map(json.dumps),
)


@st.composite
def config_text(draw):
    """A config.json text: the base with some keys set to generated (often hostile) JSON values,
    sometimes a key set twice, sometimes the whole nested."""
    family = draw(st.sampled_from(FAMILIES))
    parts = [f'"model_type": {json.dumps(family)}']
    parts += [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in BASE.items() if k != "model_type"]
    for key in draw(st.lists(st.sampled_from(KEYS), max_size=5)):
        parts.append(f"{json.dumps(key)}: {draw(values)}")
    text = "{" + ", ".join(parts) + "}"
    if draw(st.booleans()) and draw(st.booleans()):
        depth = draw(st.integers(1, 2000))
        text = "[" * depth + text + "]" * depth
    return text


def _contract(call):
    with _within(BUDGET_S):
        try:
            return call()
        except WusError as exc:
            msg = str(exc)
            assert "\n" not in msg and len(msg) < 2000, msg[:300]
            return None


@settings(max_examples=FUZZ_REDUCED_EXAMPLES * 2, **_SETTINGS)
@given(text=config_text())
def test_fuzzed_configs(text, tmp_path_factory):
    _check_config(text, tmp_path_factory)


@pytest.mark.slow
@settings(max_examples=FUZZ_FULL_EXAMPLES, **_SETTINGS)
@given(text=config_text())
def test_fuzzed_configs_full(text, tmp_path_factory):
    _check_config(text, tmp_path_factory)


def _check_config(text, tmp_path_factory):
    path = tmp_path_factory.mktemp("c") / "config.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    out = _contract(lambda: import_workload(path))
    if out is not None:  # what was written is what every command reads
        workload_from_text(out, file=path)


@st.composite
def header_bytes(draw):
    """A safetensors file: an 8-byte length (sometimes lying) and a header of generated entries."""
    entries = {}
    for i in range(draw(st.integers(0, 4))):
        name = draw(st.sampled_from(["model.embed_tokens.weight", "w", "x" * 300, f"t{i}", "__metadata__"]))
        shape = draw(st.one_of(st.lists(st.integers(-2, 2**40), max_size=10), st.just("3"), st.just(None),
                               st.just([1] * 1000)))
        entries[name] = {"dtype": draw(st.sampled_from(["F32", "BF16", 5, "x" * 100])), "shape": shape}
    header = json.dumps(entries).encode()
    if draw(st.booleans()):
        header = header.replace(b"[", b"[NaN, ", 1)
    length = draw(st.sampled_from([len(header), len(header) + 10, 2**64 - 1, 60 * 2**20, 3]))
    return struct.pack("<Q", length) + header


@settings(max_examples=FUZZ_REDUCED_EXAMPLES, **_SETTINGS)
@given(data=header_bytes())
def test_fuzzed_safetensors_headers(data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("s")
    (folder / "config.json").write_text(json.dumps(BASE))
    (folder / "model.safetensors").write_bytes(data)
    out = _contract(lambda: import_workload(folder))
    if out is not None:
        workload_from_text(out, file=folder / "w.yaml")


@settings(max_examples=FUZZ_REDUCED_EXAMPLES * 2, **_SETTINGS)
@given(text=st.one_of(st.text(max_size=200), config_text(), st.binary(max_size=200)))
def test_strict_json_reader_parses_or_refuses_in_one_line(text):
    doc = _contract(lambda: loads_strict(text, file="x.json"))
    if doc is not None:  # what it accepts is JSON that round-trips strictly
        assert json.loads(json.dumps(doc, allow_nan=False)) == doc


# ------------------------------------------------------------------ API arguments
ARGUMENTS = st.one_of(st.booleans(), st.integers(-2**70, 2**70), st.floats(), st.text(max_size=5),
                      st.sampled_from([None, [], {}, np.int64(3), np.float64(0.5), np.bool_(True), np.int64(-1),
                                       np.float64("nan"), 2**200, "true", "1"]))
CALLS = {
    "plan.replicas": lambda v: _plan(replicas=v), "plan.bucket_bytes": lambda v: _plan(bucket_bytes=v),
    "plan.max_padding_ratio": lambda v: _plan(max_padding_ratio=v),
    "load_topology.megacore": lambda v: wus_sim.load_topology("tpu-v3-8", megacore=v),
    "load_topology.link_GBps": lambda v: wus_sim.load_topology("tpu-v3-8", link_GBps=v),
    "load_topology.seed": lambda v: wus_sim.load_topology("tpu-v3-8", failed_links=1, seed=v),
    "analyse.weight_bytes": lambda v: wus_sim.analyse("adam", weight_bytes=v),
    "StepOptions.steps": lambda v: wus_sim.StepOptions(steps=v),
    "StepOptions.bidirectional": lambda v: wus_sim.StepOptions(bidirectional=v),
    "compute_params.mxu_efficiency": lambda v: wus_sim.load_calibration().compute_params(mxu_efficiency=v),
    "memory_breakdown.batch": lambda v: wus_sim.memory_breakdown(_plan(), "sharded", v),
}


def _plan(**kw):
    return wus_sim.plan(wus_sim.load_workload("ncf"), wus_sim.load_topology("tpu-v3-8"), "adam", **kw)


@settings(max_examples=FUZZ_REDUCED_EXAMPLES * 2, **_SETTINGS)
@given(name=st.sampled_from(sorted(CALLS)), value=ARGUMENTS)
def test_api_arguments_work_or_raise_a_wus_error(name, value):
    result = _contract(lambda: CALLS[name](value))
    if result is not None and isinstance(value, bool):
        # a bool is not a number: only a boolean argument may take one
        assert name in ("load_topology.megacore", "StepOptions.bidirectional"), name
    if result is not None and isinstance(value, float) and not math.isfinite(value):
        pytest.fail(f"{name} accepted {value}")
