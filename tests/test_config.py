

def test_yaml_is_parsed_once_per_content_and_each_caller_gets_its_own_copy(tmp_path):
    """A sweep loads one workload file for every point: the parse is cached by the file's text,
    but a caller that edits its document cannot change what the next caller reads, and an
    edited file is read anew."""
    from wus_sim.config import load_yaml

    path = tmp_path / "doc.yaml"
    path.write_text("a: [1, 2]\nb: {c: 3}\n", encoding="utf-8")
    first = load_yaml(path)
    first["a"].append(99)
    first["b"]["c"] = 0
    assert load_yaml(path) == {"a": [1, 2], "b": {"c": 3}}
    path.write_text("a: [5]\n", encoding="utf-8")
    assert load_yaml(path) == {"a": [5]}
