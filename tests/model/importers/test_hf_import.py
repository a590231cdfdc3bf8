"""wus_sim.import_workload: a top-level name returning a Workload, optionally writing the file."""

from pathlib import Path

import wus_sim
from wus_sim.model.workload import Workload
from wus_sim.model.workload_files import load_workload

CONFIG = Path(__file__).resolve().parents[2] / "data" / "hf_configs" / "gpt2.json"


def test_import_workload_returns_a_workload_and_can_write_the_file(tmp_path):
    w = wus_sim.import_workload(CONFIG)
    assert isinstance(w, Workload) and w.path is None
    # GPT-2 small, by hand (see tests/model/importers/test_hf_families.py): 124,439,808 parameters, 1,024 tokens
    assert w.params == 124_439_808 and w.units_per_example == 1024
    out = tmp_path / "gpt2.yaml"
    written = wus_sim.import_workload(CONFIG, out=out, sequence_length=256, name="small")
    assert out.is_file() and written.path == str(out.resolve()) and written.name == "small"
    assert written.units_per_example == 256 and load_workload(str(out)).params == w.params
    # the old text-returning function is still there
    from wus_sim.model.importers.importers import import_workload as as_text
    assert as_text(CONFIG).startswith("# Written by wus-sim import-workload")
    run = wus_sim.simulate_strategies(w, "tpu-v3-8", "adamw")
    assert set(run.speedups) == {"sharded"}


def test_a_name_with_characters_yaml_refuses_raw_reads_back_as_written(tmp_path):
    """DEL, the C1 controls (NEL among them), U+FFFE: JSON writes them raw, YAML refuses or folds
    them; the written file escapes them and reads back with the very name."""

    for name in ("\x7f", "a\x85b", "c\x9dd\ufffe", "é😀\u2028x", "tab\there"):
        out = tmp_path / "w.yaml"
        written = wus_sim.import_workload(CONFIG, out=out, name=name)
        assert written.name == name and load_workload(str(out)).name == name
        assert "\x7f" not in out.read_text() and "\x85" not in out.read_text()
