"""YAML is parsed by libyaml where that is surely what the strict pure-Python loader returns
(inputs.config._parse_with_libyaml): the same documents, and every refusal still the strict
loader's own (anchors, aliases, repeated and merge keys, nesting, bad syntax)."""

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from wus_sim.inputs import config
from wus_sim.inputs.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(config._FastStrictLoader is None, reason="PyYAML built without libyaml")


def _strict(text):
    return yaml.load(text, Loader=config._StrictLoader)


@pytest.mark.parametrize("path", sorted([*ROOT.glob("wus_sim/data/**/*.yaml"), *ROOT.glob("topologies/*.yaml"),
                                         *ROOT.glob("experiments/*.yaml")]), ids=lambda p: p.name)
def test_every_shipped_file_is_read_by_libyaml_as_the_strict_loader_reads_it(path):
    text = path.read_text(encoding="utf-8")
    fast = config._parse_with_libyaml(text)
    assert fast is not config._UNSURE
    assert repr(fast) == repr(_strict(text))


scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=False),
                    st.text(max_size=12))
documents = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                         max_leaves=20)


@settings(max_examples=150, deadline=None)
@given(doc=documents, flow=st.booleans())
def test_any_document_is_read_the_same(doc, flow):
    text = yaml.safe_dump({"doc": doc}, default_flow_style=flow, allow_unicode=True)
    fast = config._parse_with_libyaml(text)
    assert fast is config._UNSURE or repr(fast) == repr(_strict(text))


def _message(text, monkeypatch=None):
    config._parse.cache_clear()
    try:
        config.parse_yaml(text, file="x.yaml")
    except ConfigError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("text", [
    "a: &x 1\nb: *x\n",              # an alias
    "a: &x 1\n",                     # an anchor alone
    "a: 1\na: 2\n",                  # a key twice
    "base: {a: 1}\nc:\n  <<: {a: 1}\n",  # a merge key
    "a: [1, 2\n",                    # not YAML
    "a: 1\n---\nb: 2\n",             # two documents
    "[" * 200 + "]" * 200 + "\n",    # too deep
])
def test_a_refused_document_gets_the_strict_loaders_message(text, monkeypatch):
    assert config._parse_with_libyaml(text) is config._UNSURE
    with_libyaml = _message(text)
    monkeypatch.setattr(config, "_FastStrictLoader", None)
    assert with_libyaml is not None and with_libyaml == _message(text)
