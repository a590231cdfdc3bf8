"""Issue 45's API examples of the model layer: a calibration's arguments at the door.

Checked by class (a WusError) and by the argument the message names, not by whole strings."""

import copy

import numpy as np
import pytest
import yaml

import wus_sim
from wus_sim import WusError
from wus_sim.model.calibration import DEFAULT_CALIBRATION, calibration_path


@pytest.mark.parametrize("stack", [5, True, b"tf-jax-2020", 2.5, object()])
def test_compute_params_stack_of_the_wrong_type_is_one_error(stack):
    """``CAL.compute_params(stack=5)`` took 5 as a stack nobody measured."""
    with pytest.raises(WusError) as err:
        wus_sim.load_calibration().compute_params(stack=stack)
    assert "stack" in str(err.value)


def test_compute_params_stack_as_numpy_text_is_the_text():
    cal = wus_sim.load_calibration()
    assert cal.compute_params(stack=np.str_(cal.default_stack)) == cal.compute_params(stack=cal.default_stack)


def _damaged(tmp_path, change):
    doc = yaml.safe_load(calibration_path(DEFAULT_CALIBRATION).read_text())
    doc = copy.deepcopy(doc)
    change(doc)
    path = tmp_path / "damaged.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.mark.parametrize("rows", [5, "resnet/tpu-v3-32", [5], {"a": 1}])
def test_a_damaged_provenance_rows_is_one_error_naming_it(tmp_path, rows):
    path = _damaged(tmp_path, lambda doc: doc["provenance"].__setitem__("rows", rows))
    with pytest.raises(WusError) as err:
        from wus_sim.validation.measured import load_measured

        wus_sim.load_calibration(path)
        wus_sim.validate(path, runs=load_measured()[:1])
    assert "provenance.rows" in str(err.value)


def test_a_typo_stack_name_in_a_calibration_is_one_error_naming_it(tmp_path):
    def typo(doc):
        name = doc["default_stack"]
        doc["stacks"][name[:-1] + "O"] = dict(doc["stacks"][name])  # a copy: YAML anchors are refused

    with pytest.raises(WusError) as err:
        wus_sim.load_calibration(_damaged(tmp_path, typo))
    assert "stacks" in str(err.value)
