"""A MaxText run translated into point parameters (wus_sim.training.parameters.maxtext): every
expected value below is worked out by hand from MaxText's rules (base.yml's defaults, -1 = the
devices over the other axes' product, global batch = per_device_batch_size x devices)."""

import pytest

from wus_sim.hardware.mesh import MESH_AXES
from wus_sim.inputs.errors import ConfigError
from wus_sim.training.parameters.maxtext import translate
from wus_sim.training.parameters.maxtext_keys import base_keys, maxtext_input, no_step_effect, parse_value, read_words

LLAMA = "model_name=llama3-8b max_target_length=8192"


def t(words, topology="tpu-v6e-256", **kw):
    return translate(maxtext_input(words=[words]), topology, **kw)


# ------------------------------------------------------------------ -1 fills the rest
@pytest.mark.parametrize("words, mesh", [
    ("", "fsdp=256"),                                                     # base.yml: ici_fsdp_parallelism -1
    ("ici_tensor_parallelism=4", "fsdp=64,tensor=4"),                      # 256 / 4
    ("ici_data_parallelism=2 ici_tensor_parallelism=4", "data=2,fsdp=32,tensor=4"),  # 256 / 8
    ("ici_fsdp_parallelism=1 ici_fsdp_transpose_parallelism=-1", "fsdp=256"),      # tiering row 1
    ("ici_fsdp_parallelism=2 ici_fsdp_transpose_parallelism=-1", "fsdp=256"),      # 2 x 128
    ("ici_fsdp_parallelism=64 ici_tensor_parallelism=4", "fsdp=64,tensor=4"),      # no -1: the product is 256
    ("ici_fsdp_parallelism=1 ici_data_parallelism=-1", "data=256"),
])
def test_ici_parallelism_fills_the_slice(words, mesh):
    assert t(f"{LLAMA} {words}").point["mesh"] == mesh


def test_a_megacore_chip_is_one_device():
    # tpu-v5p-128: 64 chips; a MaxText device is a chip, so -1 fills 64 and 2 a device is 128
    run = t(f"{LLAMA} per_device_batch_size=2", "tpu-v5p-128")
    assert run.megacore and run.devices == 64 and run.point["megacore"] is True
    assert run.point["mesh"] == "fsdp=64" and run.point["global_batch"] == 128
    assert "a chip" in run.notes[0]
    assert not t(LLAMA).megacore and "megacore" not in t(LLAMA).point  # v6e: one TensorCore a chip


def test_dcn_parallelism_fills_the_slices():
    run = t(f"{LLAMA} num_slices=4 dcn_fsdp_parallelism=2 per_device_batch_size=1")
    assert run.point["slices"] == 4 and run.point["dcn_mesh"] == "data=2,fsdp=2"   # 4 / 2 = 2 data
    assert run.point["global_batch"] == 4 * 256


def test_dcn_keys_on_one_slice_are_ignored_with_a_note():
    run = t(f"{LLAMA} dcn_fsdp_parallelism=2")  # num_slices -1 and no --slices: one slice
    assert "dcn_mesh" not in run.point and run.slices == 1
    assert any("dcn_fsdp_parallelism=2" in n and "one slice" in n for n in run.notes)


@pytest.mark.parametrize("words, said", [
    ("ici_data_parallelism=-1", "at most one axis may be -1"),           # with base.yml's fsdp -1
    ("ici_fsdp_parallelism=3", "multiply to 3, but the slice has 256 devices"),
    ("ici_fsdp_parallelism=-1 ici_tensor_parallelism=3", "does not divide"),
    ("ici_fsdp_parallelism=0", "whole number >= 1, or -1"),
])
def test_a_mesh_that_does_not_fill_the_slice_is_one_line(words, said):
    with pytest.raises(ConfigError, match=said) as e:
        t(f"{LLAMA} {words}")
    assert "\n" not in str(e.value)


def test_an_axis_the_mesh_lacks_is_not_modelled_and_named():
    assert "tensor_sequence" not in MESH_AXES  # (expert and pipeline, once missing, now exist)
    with pytest.raises(ConfigError, match="ici_tensor_sequence_parallelism=4 \\(the mesh has no tensor_sequence axis\\)"):
        t(f"{LLAMA} ici_fsdp_parallelism=-1 ici_tensor_sequence_parallelism=4")


# ------------------------------------------------------------------ batch, remat, optimizer
@pytest.mark.parametrize("pdbs, tensor, batch", [(4, 1, 1024), (0.5, 2, 128), (0.25, 4, 64)])
def test_global_batch_is_per_device_batch_times_devices(pdbs, tensor, batch):
    assert t(f"{LLAMA} per_device_batch_size={pdbs} ici_tensor_parallelism={tensor}").point["global_batch"] == batch


def test_a_fraction_that_is_not_a_whole_batch_is_refused():
    with pytest.raises(ConfigError, match="76.8 sequences, not a whole number"):
        t(f"{LLAMA} per_device_batch_size=0.3")


def test_base_yml_defaults_apply_where_the_run_says_nothing():
    run = t(LLAMA)
    # base.yml: per_device_batch_size 12, remat_policy full, opt_type adamw with clipping at 1.0
    assert run.point["global_batch"] == 12 * 256
    assert run.point["remat_policy"] == "full" and run.point["optimizer"] == "adamw+clip"
    assert run.point["quantization"] == "none" and run.point["strategy"] == "replicated"
    assert {"global_batch", "remat_policy", "optimizer"} <= run.defaulted


@pytest.mark.parametrize("words, point", [
    ("remat_policy=minimal", {"remat_policy": "minimal"}),
    ("remat_policy=none", {"remat": "none"}),
    ("remat_policy=custom decoder_layer_input=offload query_proj=device mlpwo=offload",
     {"remat_policy": "custom:decoder_layer_input=offload,query_proj=device,mlpwo=offload"}),
    ("opt_type=sgd gradient_clipping_threshold=0", {"optimizer": "sgd"}),
    ("opt_type=adam_pax", {"optimizer": "adamw+clip"}),
    ("quantization=int8 grad_dtype=bfloat16", {"quantization": "int8", "grad_dtype": "bf16"}),
    ("shard_optimizer_over_data=true", {"strategy": "sharded"}),
])
def test_each_key_becomes_its_point_key(words, point):
    run = t(f"{LLAMA} {words}")
    assert {k: run.point.get(k) for k in point} == point


def test_per_tensor_remat_keys_without_custom_change_nothing():
    run = t(f"{LLAMA} remat_policy=minimal query_proj=offload")
    assert run.point["remat_policy"] == "minimal"
    assert ("query_proj=offload", "read only under remat_policy=custom, as in MaxText") in run.listed


# ------------------------------------------------------------------ what is refused, listed or approximated
def test_keys_not_modelled_are_named_in_one_line():
    with pytest.raises(ConfigError) as e:
        t(f"{LLAMA} gradient_accumulation_steps=4 scan_layers=false quantization=fp8 remat_policy=minimal_with_context")
    text = str(e.value)
    assert "\n" not in text and text.startswith("--maxtext: not modelled")
    for word in ("gradient_accumulation_steps=4", "scan_layers=false", "quantization=fp8",
                 "remat_policy=minimal_with_context"):
        assert word in text


def test_a_step_changing_key_at_base_ymls_default_is_accepted():
    run = t(f"{LLAMA} gradient_accumulation_steps=1 use_dpo=false megablox=true")
    listed = dict(run.listed)
    assert listed["gradient_accumulation_steps=1"] == "base.yml's default"


def test_keys_without_effect_are_listed_with_why():
    run = t(f"{LLAMA} steps=20 dataset_type=synthetic enable_checkpointing=false sa_block_q=1024")
    listed = dict(run.listed)
    assert set(listed) == {"steps=20", "dataset_type=synthetic", "enable_checkpointing=false", "sa_block_q=1024"}
    assert "checkpoints" in listed["enable_checkpointing=false"]


def test_approximated_keys_need_the_flag():
    words = f"{LLAMA} weight_dtype=bfloat16 custom_mesh=ring_of_my_own"
    with pytest.raises(ConfigError, match="weight_dtype=bfloat16, custom_mesh=ring_of_my_own \\(--maxtext-approximate"):
        t(words)
    run = t(words, approximate=True)
    assert [k for k, _ in run.approximated] == ["weight_dtype=bfloat16", "custom_mesh=ring_of_my_own"]
    assert sum("approximated" in n for n in run.notes) == 2
    assert run.custom_mesh is None


RING = f"{LLAMA} ici_fsdp_parallelism=64 ici_tensor_parallelism=4 custom_mesh=hybrid_ring_64x4"


@pytest.mark.parametrize("words, used", [
    # src/maxtext/utils/maxtext_utils.py, create_device_mesh: across slices always; on one slice only
    # under allow_split_physical_axes (else create_device_mesh(ici_parallelism), the key never read)
    (f"{RING} allow_split_physical_axes=true", True),
    (f"{RING} num_slices=2", True),
    (RING, False),
])
def test_a_hybrid_ring_is_laid_out_where_maxtext_uses_it(words, used):
    run = t(words)
    assert run.custom_mesh == ("hybrid_ring_64x4" if used else None) and not run.approximated
    if used:
        assert any("laid out as MaxText's hybrid_ring_64x4" in n for n in run.notes)
    else:
        assert "allow_split_physical_axes" in dict(run.listed)["custom_mesh=hybrid_ring_64x4"]


def test_a_search_approximates_the_hybrid_ring():
    words = f"{RING} allow_split_physical_axes=true"
    with pytest.raises(ConfigError, match="custom_mesh=hybrid_ring_64x4 \\(--maxtext-approximate"):
        t(words, search=True)
    assert t(words, search=True, approximate=True).custom_mesh is None


def test_moe_keys_on_a_dense_model_change_nothing():
    run = t(f"{LLAMA} megablox=false capacity_factor=1.25")
    assert dict(run.listed)["capacity_factor=1.25"] == "workload llama3-8b has no experts"


def test_a_library_model_at_another_sequence_is_rebuilt_at_it():
    # MaxText's library model at the run's max_target_length (base.yml's 2,048 where not given): the
    # point's workload names the model and the length, and loads again to the same model
    from wus_sim.model.importers.maxtext_model import resolve_workload

    run = t("model_name=llama3-8b")
    assert run.point["workload"] == "llama3-8b@2048"
    assert any("llama3-8b@2048" in n and "base.yml's default; not given" in n for n in run.notes)
    run = t("model_name=llama3-8b max_target_length=4096")
    assert run.point["workload"] == "llama3-8b@4096" and run.sources["workload"].endswith("max_target_length=4096")
    assert resolve_workload(run.point["workload"]).units_per_example == 4096
    assert t(LLAMA).point["workload"] == "llama3-8b"  # the shipped length: the shipped workload
    # no model_name: base.yml's `default`, MaxText's default model (shipped at 2,048 tokens)
    assert t("max_target_length=8192").point["workload"] == "default@8192"


def test_a_workload_outside_the_library_at_another_sequence_is_refused():
    with pytest.raises(ConfigError, match="4096 is not the 512 tokens .*--sequence-length 4096"):
        t("max_target_length=4096", explicit={"workload": ("bert-large", "WORKLOAD")})
    with pytest.raises(ConfigError, match="max_target_length: 0 must be a whole number"):
        t("model_name=llama3-8b max_target_length=0")


def test_a_model_name_not_shipped_names_the_closest():
    with pytest.raises(ConfigError, match="names no workload \\(did you mean (llama3.1-8b or )?llama3-8b"):
        t("model_name=llama3.8b max_target_length=8192")


# ------------------------------------------------------------------ options beside the run
def test_an_option_contradicting_a_given_key_is_an_error_naming_both():
    with pytest.raises(ConfigError, match="--remat-policy minimal: contradicts remat_policy=full"):
        t(f"{LLAMA} remat_policy=full", explicit={"remat_policy": ("minimal", "--remat-policy minimal")})
    with pytest.raises(ConfigError, match="--mesh data=256: contradicts ici_tensor_parallelism=4"):
        t(f"{LLAMA} ici_tensor_parallelism=4", explicit={"mesh": ("data=256", "--mesh data=256")})


def test_an_option_beside_a_default_key_wins():
    run = t(LLAMA, explicit={"remat_policy": ("minimal", "--remat-policy minimal"),
                             "mesh": ("fsdp=-1,tensor=8", "--mesh fsdp=-1,tensor=8"),
                             "quantization": ("int8", "--quantization int8")})
    assert "remat_policy" not in run.point and "mesh" not in run.point and "quantization" not in run.point
    assert dict(run.listed)["remat_policy=full"] == "base.yml's default, not used: --remat-policy minimal given"


def test_an_option_equal_to_the_run_is_no_contradiction():
    run = t(f"{LLAMA} ici_fsdp_parallelism=-1 ici_tensor_parallelism=4",
            explicit={"mesh": ("tensor=4,fsdp=-1", "--mesh tensor=4,fsdp=-1")})
    assert run.point["mesh"] == "fsdp=64,tensor=4"


def test_no_megacore_beside_a_run_on_v5p_is_refused():
    with pytest.raises(ConfigError, match="--no-megacore: contradicts the MaxText run"):
        t(LLAMA, "tpu-v5p-128", explicit={"megacore": (False, "--no-megacore")})


def test_search_fixes_only_what_the_run_gives():
    run = t(f"{LLAMA} ici_tensor_parallelism=4 per_device_batch_size=1", search=True)
    assert run.point["mesh"] == "tensor=4" and "remat_policy" not in run.point
    assert run.point["global_batch"] == 256


# ------------------------------------------------------------------ reading the words and the keys
def test_later_keys_win(tmp_path):
    cfg = tmp_path / "run.yml"
    cfg.write_text("base_config: base.yml\nper_device_batch_size: 2\nremat_policy: minimal\n")
    inp = maxtext_input(files=[cfg], words=[f"{LLAMA} per_device_batch_size=3",
                                            "per_device_batch_size=1 per_device_batch_size=5"])
    assert inp.value("per_device_batch_size") == 5 and inp.value("remat_policy") == "minimal"
    assert inp.where["per_device_batch_size"] == "--maxtext" and inp.where["remat_policy"] == str(cfg)
    assert translate(inp, "tpu-v6e-256").point["global_batch"] == 5 * 256


def test_a_pasted_command_line_skips_its_launcher():
    pairs, skipped = read_words("LIBTPU_INIT_ARGS=--x python3 -m MaxText.train MaxText/configs/base.yml "
                                "run_name=a steps=10 --foo=bar enable_checkpointing=False")
    assert pairs == [("run_name", "a"), ("steps", 10), ("enable_checkpointing", False)]
    assert [w for w, _ in skipped] == ["LIBTPU_INIT_ARGS=--x", "python3", "-m", "MaxText.train",
                                       "MaxText/configs/base.yml", "--foo=bar"]
    with pytest.raises(ConfigError, match="give its keys with --maxtext-config"):
        read_words("python3 -m MaxText.train my/own.yml steps=1")
    with pytest.raises(ConfigError, match="is not a MaxText KEY=VALUE word"):
        read_words("steps=1 oops")


@pytest.mark.parametrize("text, value", [("-1", -1), ("0.5", 0.5), ("True", True), ("false", False), ("flash", "flash"),
                                         ("yes", "yes"), ("10_000", 10000), ("", None), ("null", None)])
def test_values_read_as_maxtexts_command_line(text, value):
    got = parse_value(text)
    assert got == value and type(got) is type(value)


def test_an_unknown_key_is_one_line_with_the_closest():
    with pytest.raises(ConfigError, match="is not a key of MaxText's base.yml \\(did you mean per_device_batch_size"):
        maxtext_input(words=["per_device_batch=4"])


def test_the_key_table_holds_base_ymls_keys_and_the_recipes_old_ones():
    keys = base_keys()
    assert len(keys) > 700 and keys["per_device_batch_size"].defaults[0] == 12.0
    assert keys["remat_policy"].defaults[0] == "full" and keys["ici_fsdp_parallelism"].defaults[0] == -1
    assert "ici_tensor_transpose_parallelism" in keys  # dropped by main, set by 2025 recipes' base.yml
    assert keys["load_balance_loss_weight"].is_default(0.01) and keys["load_balance_loss_weight"].is_default(0.0)


def test_no_effect_groups_take_no_key_the_translation_reads():
    from wus_sim.training.parameters.maxtext_table import REMAT_TENSOR_KEYS

    read = {"model_name", "per_device_batch_size", "max_target_length", "remat_policy", "quantization", "attention",
            "opt_type", "dtype", "weight_dtype", "grad_dtype", "num_slices", "capacity_factor", *REMAT_TENSOR_KEYS}
    read |= {k for k in base_keys() if k.startswith(("ici_", "dcn_")) and k.endswith("_parallelism")}
    assert not [k for k in read if no_step_effect(k)]


def test_the_key_table_is_what_its_generator_writes():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    snapshot = Path("/work/.mirror/AI-Hypercomputer+maxtext/repo")
    if not snapshot.exists():
        pytest.skip(f"no snapshot of AI-Hypercomputer/maxtext at {snapshot}; "
                    "run tests/tools/regenerate_maxtext_keys.py --check --repo PATH by hand")
    out = subprocess.run([sys.executable, str(root / "tests" / "tools" / "regenerate_maxtext_keys.py"), "--check",
                          "--repo", str(snapshot)], capture_output=True, text=True, cwd=root)
    assert out.returncode == 0, out.stderr


def test_remat_beside_the_run():
    # --remat none asks for no remat at all: it wins over base.yml's full and contradicts a given policy
    run = t(LLAMA, explicit={"remat": ("none", "--remat none")})
    assert "remat_policy" not in run.point and dict(run.listed)["remat_policy=full"].endswith("--remat none given")
    with pytest.raises(ConfigError, match="--remat layer: contradicts remat_policy=minimal"):
        t(f"{LLAMA} remat_policy=minimal", explicit={"remat": ("layer", "--remat layer")})
    run = t(f"{LLAMA} remat_policy=minimal", explicit={"remat": ("none", "--remat none"),
                                                         "remat_policy": ("minimal", "--remat-policy minimal")})
    assert run.point["remat_policy"] == "minimal"
