"""``calibrate(compute_model="shape")``: the fit runs and writes the shape compute model, fits its
own values, and refuses a value only the other model reads."""

import pytest

from wus_sim.inputs.errors import ConfigError
from wus_sim.validation.calibrate import calibrate
from wus_sim.validation.measured import load_measured
from wus_sim.validation.validate import row_key, validate

ROWS = "resnet/tpu-v3-32,resnet/tpu-v3-512,ssd/tpu-v3-128"


def test_a_shape_fit_declares_its_model_and_its_errors_are_the_shape_models():
    cal = calibrate(rows=ROWS, fit="matmul_peak_fraction", compute_model="shape", uncertainty=False)
    assert cal.params["compute_model"] == "shape"
    assert cal.provenance["fitted"] == ["matmul_peak_fraction"]
    assert 0.3 <= cal.params["matmul_peak_fraction"] <= 1.0
    assert "mxu_efficiency" not in cal.params
    # validating the file reproduces the fit's own errors: every simulation ran the shape model
    by_key = {row_key(r): r for r in validate(cal, runs=[r for r in load_measured() if row_key(r) in ROWS.split(",")])}
    for key, e in cal.provenance["fit_error"]["per_row"].items():
        assert e == pytest.approx(by_key[key].simulated_step_s / by_key[key].measured_step_s - 1, rel=1e-9)
    assert cal.compute_params().compute_model == "shape"


@pytest.mark.parametrize("fit, model", [("mxu_efficiency", "shape"), ("matmul_peak_fraction", "flops"),
                                        ("op_fixed_s", "flops")])
def test_fitting_a_value_the_model_does_not_read_is_an_error(fit, model):
    with pytest.raises(ConfigError, match="another compute model"):
        calibrate(rows=ROWS, fit=fit, compute_model=model)


def test_an_unknown_compute_model_is_an_error():
    with pytest.raises(ConfigError, match="compute_model"):
        calibrate(rows=ROWS, fit="matmul_peak_fraction", compute_model="roofline")
