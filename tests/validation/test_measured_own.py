"""A table of your own measured step times: loaded with the shipped table's columns (only
the required ones must be there), fitted with `calibrate --measured`, validated with
`validate --measured`; rows count as calibration rows only in the table a fit was made on."""

import csv
import json

import pytest

from wus_sim.model.calibration import load_calibration
from wus_sim.cli import main
from wus_sim.inputs.errors import ConfigError
from wus_sim.validation.measured import REQUIRED_COLUMNS, SHIPPED_MEASURED, load_measured, table_identity
from wus_sim.validation.validate import validate

SCALE = 1.1


def _write(path, rows, columns=REQUIRED_COLUMNS):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, list(columns))
        w.writeheader()
        for r in rows:
            w.writerow({k: r[k] for k in columns})
    return path


@pytest.fixture
def own(tmp_path):
    """The shipped SSD rows with every time 10 % longer, required columns only."""
    with open(SHIPPED_MEASURED, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["benchmark"] == "ssd"]
    for r in rows:
        r["measured_step_s"] = repr(float(r["measured_step_s"]) * SCALE)
    return _write(tmp_path / "my_runs.csv", rows, REQUIRED_COLUMNS + ("bn_group_cores",))


def test_required_columns_are_enough_and_the_rest_default(own):
    runs = load_measured(own)
    shipped = {r.topology: r for r in load_measured() if r.benchmark == "ssd" and r.round == "v0.6"}
    assert len(runs) == len(shipped) == 6
    for r in runs:
        s = shipped[r.topology]
        assert r.measured_step_s == pytest.approx(SCALE * s.measured_step_s, rel=1e-12)
        assert r.step_s_min == r.step_s_max == r.measured_step_s
        assert (r.update, r.eval_on_device, r.runs, r.sources, r.grad_allreduce_dtype) == ("unknown", None, 1, (), "")
        assert (r.bn_group_cores, r.spatial_ways, r.kind) == (s.bn_group_cores, s.spatial_ways, s.kind)


@pytest.mark.parametrize("edit,where,rule", [
    (lambda rows, cols: (rows, [c for c in cols if c != "kind"]), "kind", "column is missing"),
    (lambda rows, cols: (rows + rows[:1], cols), "line 8", "names the same benchmark/topology as line 2"),
    (lambda rows, cols: ([dict(rows[0], cores="64")] + rows[1:], cols), "line 2.cores", "replicas x spatial_ways"),
    (lambda rows, cols: ([dict(rows[0], global_batch="2048")] + rows[1:], cols), "line 2.global_batch",
     "per_replica_batch x replicas"),
    (lambda rows, cols: ([dict(rows[0], measured_step_s="0")] + rows[1:], cols), "line 2.measured_step_s",
     "must be > 0"),
    (lambda rows, cols: ([dict(rows[0], kind="approx")] + rows[1:], cols), "line 2.kind", "exact"),
    (lambda rows, cols: (rows[:2] + [dict(rows[2], measured_step_s="inf")] + rows[3:], cols),
     "line 4.measured_step_s", "must be finite"),
    (lambda rows, cols: ([dict(rows[0], cores="32.5")] + rows[1:], cols), "line 2.cores",
     "does not parse as a whole number"),
    # was 'does not parse' (a KeyError of the parser's lookup)
    (lambda rows, cols: ([dict(r, eval_on_device="maybe" if i == 0 else "true") for i, r in enumerate(rows)],
                         cols + ["eval_on_device"]),
     "line 2.eval_on_device", "'maybe' must be one of true, false, unknown"),
])
def test_a_bad_table_is_one_error_naming_file_line_and_rule(own, tmp_path, edit, where, rule):
    with open(own, newline="") as f:
        rows = list(csv.DictReader(f))
    rows, cols = edit(rows, list(rows[0]))
    bad = _write(tmp_path / "bad.csv", rows, cols)
    with pytest.raises(ConfigError) as err:
        load_measured(bad)
    assert "bad.csv" in str(err.value) and where in str(err.value) and rule in str(err.value)


def test_a_row_with_more_fields_than_the_header_is_an_error(own, tmp_path):
    lines = own.read_text().splitlines()
    lines[1] += ",x"
    bad = tmp_path / "extra.csv"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=r"extra\.csv.*line 2.*number of fields"):
        load_measured(bad)


def test_calibrate_on_your_table_marks_its_rows_there_only(own, tmp_path, capsys):
    out = tmp_path / "cal.yaml"
    fitted = "ssd/tpu-v3-128,ssd/tpu-v3-1024"
    assert main(["calibrate", "--measured", str(own), "--rows", fitted, "--compute-model", "flops", "--fit", "mxu_efficiency,step_overhead_s",
                 "--out", str(out)]) == 0
    cal = load_calibration(str(out))
    data = cal.provenance["data"]
    assert data == table_identity(own) and len(data["sha256"]) == 64 and data["name"].endswith("my_runs.csv")
    assert cal.id.startswith("my_runs-") and cal.provenance["rows_declared"] is False
    # two parameters, two rows: the fit is exact
    assert max(abs(e) for e in cal.provenance["fit_error"]["per_row"].values()) < 1e-6
    rows = validate(cal, measured=own)
    assert {f"{r.benchmark}/{r.topology}" for r in rows if r.role == "calibration"} == set(fitted.split(","))
    checked = cal.provenance["validation"]
    assert checked["held_out_rows"] == 3 and checked["bound_rows"] == 1      # 6 rows: 2 fitted, 1 bound
    assert checked["measured"] == data["name"]
    # the same calibration on the shipped table: nothing there was fitted to
    assert all(r.role == "held-out" for r in validate(cal))
    # nor on the file once it changed
    own.write_text(own.read_text().replace("momentum", "momentum", 1) + "\n")
    assert all(r.role == "held-out" for r in validate(cal, measured=own))
    # and the shipped calibration on your table marks none of it
    assert all(r.role == "held-out" for r in validate(measured=own))


def test_every_row_fitted_states_no_held_out_error(own, tmp_path, capsys):
    out = tmp_path / "all.yaml"
    assert main(["calibrate", "--measured", str(own), "--compute-model", "flops", "--fit", "mxu_efficiency,step_overhead_s",
                 "--out", str(out)]) == 0
    assert "fit to 5 training-only rows" in capsys.readouterr().out
    checked = load_calibration(str(out)).provenance["validation"]
    assert checked["held_out_rows"] == 0 and checked["held_out_median_abs"] is None
    assert main(["step", "ssd-resnet34", "-t", "tpu-v3-128", "--calibration", str(out)]) == 0
    assert "its error on runs it was not fitted to is unknown" in capsys.readouterr().out.splitlines()[1]
    assert main(["step", "ssd-resnet34", "-t", "tpu-v3-128", "--calibration", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["checked"]["held_out_median_abs"] is None


def test_a_row_the_simulator_cannot_take_is_one_line_naming_it(own, tmp_path, capsys):
    text = own.read_text().replace("ssd-resnet34", "ssd-resnet35", 1)
    bad = tmp_path / "typo.csv"
    bad.write_text(text)
    assert main(["validate", "--measured", str(bad), "--no-plots", "--out", str(tmp_path / "v")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "measured row ssd/tpu-v3-32" in err[0] and "ssd-resnet35" in err[0]
    assert main(["validate", "--measured", str(own), "--choices"]) == 2
    assert "shipped table only" in capsys.readouterr().err


def test_a_table_that_is_not_one_is_one_line_exit_2(own, tmp_path, capsys):
    binary = tmp_path / "photo.csv"
    binary.write_bytes(bytes(range(128, 256)))
    header_only = tmp_path / "empty.csv"
    header_only.write_text(own.read_text().splitlines()[0] + "\n")
    empty = tmp_path / "nothing.csv"
    empty.write_text("")
    for path, rule in ((tmp_path, "is a folder"), (binary, "not a UTF-8 text"), (empty, "is empty: no header line"),
                       (header_only, "has no measured rows"), (tmp_path / "nope.csv", "file not found")):
        for argv in (["validate", "--measured", str(path), "--no-plots", "--out", str(tmp_path / "v")],
                     ["calibrate", "--measured", str(path), "--out", str(tmp_path / "c.yaml")]):
            assert main(argv) == 2, (path, argv[0])
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and rule in err[0] and str(path) in err[0]
    # a spreadsheet's UTF-8 export with a byte-order mark reads as the same table
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + own.read_bytes())
    assert load_measured(bom) == load_measured(own)


@pytest.mark.parametrize("column,typo", [("workload", "ssd-resnet35"), ("topology", "tpu-v3-33"),
                                         ("optimizer", "momentun")])
def test_a_name_the_simulator_does_not_know_names_file_line_and_column(own, tmp_path, capsys, column, typo):
    """A table of your own may hold hundreds of rows: the error points at the cell, whichever
    command reads the table (an unknown topology named neither file nor row)."""
    with open(own, newline="") as f:
        rows = list(csv.DictReader(f))
    rows[2][column] = typo
    bad = _write(tmp_path / "typo.csv", rows, list(rows[0]))
    for argv in (["validate", "--measured", str(bad), "--no-plots", "--out", str(tmp_path / "v")],
                 ["calibrate", "--measured", str(bad), "--compute-model", "flops", "--fit", "mxu_efficiency,step_overhead_s",
                  "--out", str(tmp_path / "c.yaml")]):
        assert main(argv) == 2, argv[0]
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"typo.csv: line 4.{column}: measured row ssd/" in err[0] and typo in err[0], err


def test_an_infinite_time_is_refused_before_the_fit(own, tmp_path, capsys):
    """inf passed the '> 0' rule, then broke the least-squares fit with a traceback."""
    bad = tmp_path / "inf.csv"
    lines = own.read_text().splitlines()
    cells = lines[3].split(",")
    cells[REQUIRED_COLUMNS.index("measured_step_s")] = "inf"
    bad.write_text("\n".join(lines[:3] + [",".join(cells)] + lines[4:]) + "\n")
    assert main(["calibrate", "--measured", str(bad), "--out", str(tmp_path / "c.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "inf.csv: line 4.measured_step_s: 'inf' must be finite" in err[0]
