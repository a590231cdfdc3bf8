"""``--quantization`` and ``--remat selective`` in ``step --json`` and ``plan --json``: valid
against their schemas, and saying what ran."""

from test_output_schemas import check, run_json


def test_step_and_plan_json_with_int8_and_selective_validate():
    # 8 sequences a replica: at 2, quantizing the operands (memory-bound passes) costs more than the
    # int8 matmuls save on these small matmuls (the shape model)
    args = ["bert-large", "-t", "tpu-v5p-8", "--per-replica-batch", "8", "--quantization", "int8",
            "--remat", "selective", "--json"]
    step = run_json("step", *args, "-s", "sharded")
    check("step", step)
    assert step["parameters"]["remat"] == "selective" and "918 TOP/s" in step["quantization_note"]
    plan = run_json("plan", *args)
    check("plan", plan)
    c = plan["compute"]
    assert (c["remat"], c["quantization"]) == ("selective", "int8") and "918 TOP/s" in c["quantization_note"]
    bf16 = run_json("plan", "bert-large", "-t", "tpu-v5p-8", "--per-replica-batch", "8", "--json")
    check("plan", bf16)
    assert bf16["compute"]["quantization_note"] is None and bf16["compute"]["fwd_time_s"] > c["fwd_time_s"]
