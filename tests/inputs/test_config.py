

def test_yaml_is_parsed_once_per_content_and_each_caller_gets_its_own_copy(tmp_path):
    """A sweep loads one workload file for every point: the parse is cached by the file's text,
    but a caller that edits its document cannot change what the next caller reads, and an
    edited file is read anew."""
    from wus_sim.inputs.config import load_yaml

    path = tmp_path / "doc.yaml"
    path.write_text("a: [1, 2]\nb: {c: 3}\n", encoding="utf-8")
    first = load_yaml(path)
    first["a"].append(99)
    first["b"]["c"] = 0
    assert load_yaml(path) == {"a": [1, 2], "b": {"c": 3}}
    path.write_text("a: [5]\n", encoding="utf-8")
    assert load_yaml(path) == {"a": [5]}


def test_numbers_in_e_notation_are_numbers(tmp_path):
    """`link_GBps: 1e2` is the number 100 in YAML 1.2 (and to the JSON Schemas an editor checks
    against); PyYAML's YAML 1.1 reads it, and even 1.0e5, as text, which the loaders then
    rejected with "is text, not a number (write it without quotes)" for a value with no quotes."""
    from wus_sim.inputs.config import load_yaml

    path = tmp_path / "doc.yaml"
    path.write_text('a: 1e2\nb: 1.0e5\nc: -2E-3\nd: .5e3\ne: +3e+0\nf: "1e2"\ng: 1.5\nh: 12\ni: e5\n')
    assert load_yaml(path) == {"a": 100.0, "b": 1.0e5, "c": -2e-3, "d": 500.0, "e": 3.0, "f": "1e2", "g": 1.5,
                               "h": 12, "i": "e5"}
    assert all(type(v) is float for v in [load_yaml(path)[k] for k in "abcde"])


def test_an_experiment_takes_a_bandwidth_in_e_notation(tmp_path):
    from wus_sim.experiments.spec import load_experiment

    path = tmp_path / "exp.yaml"
    path.write_text("workloads: resnet50\ntopologies: tpu-v3-32\nbase: {link_GBps: 1e2}\n")
    assert load_experiment(path).points()[0]["link_GBps"] == 100
