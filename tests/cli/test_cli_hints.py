"""What step and plan say a user needs: tokens per sequence in step's header, and on TPU v4/v5p
without --megacore that a replica is one TensorCore and how to ask for one per chip."""

from wus_sim.cli import main


def run(capsys, *argv):
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_step_header_shows_tokens_per_sequence(capsys):
    head = run(capsys, "step", "llama3-8b", "-t", "tpu-v6e-256").splitlines()[0]
    assert "8,192 tokens per sequence" in head   # the shipped file's sequence length
    head = run(capsys, "step", "resnet50", "-t", "tpu-v3-32").splitlines()[0]
    assert "per sequence" not in head             # an image is one unit: nothing to say


def test_v5p_and_v4_with_no_megacore_say_a_replica_is_one_tensorcore(capsys):
    out = run(capsys, "step", "llama3-8b", "-t", "tpu-v5p-128", "--no-megacore")
    assert "a replica is one TensorCore" in out and "47.5 GiB" in out and "--megacore (the default" in out
    for megacore in (["--megacore"], []):  # a chip a device by default on v4 and v5p, as JAX counts it
        assert "a replica is one TensorCore" not in run(capsys, "step", "llama3-8b", "-t", "tpu-v5p-128", *megacore)
    assert "--megacore" in run(capsys, "plan", "llama3-8b", "-t", "tpu-v4-128", "--no-megacore")
    assert "TensorCore" not in run(capsys, "plan", "resnet50", "-t", "tpu-v3-32")   # v3: no megacore mode
