"""The JSON Schema of the Hugging Face config.json keys import-workload reads: every shipped
config copy is valid, a config missing a key its family needs or of an unknown family is not,
and the schema says what the importer itself refuses."""

import json
from pathlib import Path

import jsonschema
import pytest

from wus_sim.inputs.errors import ConfigError
from wus_sim.model.importers.importers import import_workload

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "wus_sim" / "schemas" / "hf-config.v1.json").read_text())
CONFIGS = sorted((ROOT / "tests" / "data" / "hf_configs").rglob("*.json"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.parent.name + "/" + p.name)
def test_every_shipped_config_copy_is_valid(path):
    doc = json.loads(path.read_text())
    if doc.get("model_type") in SCHEMA["properties"]["model_type"]["enum"]:
        jsonschema.validate(doc, SCHEMA)


def test_a_missing_key_is_refused_by_the_schema_and_the_importer(tmp_path):
    llama = next(p for p in CONFIGS if json.loads(p.read_text()).get("model_type") == "llama")
    doc = json.loads(llama.read_text())
    del doc["hidden_size"]
    with pytest.raises(jsonschema.ValidationError, match="hidden_size"):
        jsonschema.validate(doc, SCHEMA)
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="hidden_size"):
        import_workload(bad)


def test_an_unknown_family_is_refused():
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"model_type": "gemma3"}, SCHEMA)
