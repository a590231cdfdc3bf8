"""Every measured run of the shipped tables fits in HBM as it ran (issue 33): a run Google trained
cannot be infeasible in the simulation. The peak is checked against the slice's HBM per core."""

from wus_sim.validation.measured import load_measured, run_key
from wus_sim.validation.simulate import NOT_EXPRESSIBLE, simulate_run


def test_every_shipped_measured_run_fits_as_measured():
    checked = []
    for run in load_measured():
        if run_key(run) in NOT_EXPRESSIBLE:
            continue
        result = simulate_run(run)
        assert result.status == "ok", (run_key(run), result.error)
        assert result.memory.peak <= result.memory.capacity
        checked.append(run_key(run))
    assert len(checked) >= 30  # both rounds
