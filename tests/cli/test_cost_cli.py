"""What it costs (issue 47, item 5): `step`, `plan` and `plan --search` print the cost of a step and
of a million tokens; `plan --search` ranks the meshes of several slices by cost or time.

Every expected cost is chips x seconds x US dollars per chip-hour / 3600 with the chips and the
price typed here (Cloud TPU v5p docs: a v5p-8 is 4 chips; tpu-v3-32 is 16 chips; chips.yaml's
prices are checked against their sources in tests/hardware/test_todays_tpus.py)."""

import json

import jsonschema
import pytest

from wus_sim.inputs.shipped import schema_path

from run_cli import run

V5P_8_CHIPS, V5P_PRICE = 4, 4.20      # SkyPilot's GCP catalog: $13,440 an hour for 3,200 v5p chips
V3_32_CHIPS, V3_PRICE = 16, 2.00      # Cloud TPU pricing page (2021-11-17 copy), us-central1
LLAMA_TOKENS = 8192                   # llama3-8b's sequence


def json_of(*argv, schema=None):
    rc, out, err = run(*argv, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    if schema:
        jsonschema.Draft202012Validator(json.loads(schema_path(schema, 1).read_text())).validate(doc)
    return doc


# ---------------------------------------------------------------- step
def test_step_costs_chips_times_its_time_times_the_price():
    doc = json_of("step", "llama3-8b", "-t", "tpu-v5p-8", "--megacore", "--global-batch", "4", "--strategy",
                  "sharded", schema="step")
    per = doc["strategies"]["sharded"]
    hand = V5P_8_CHIPS * per["step_time_s"] * V5P_PRICE / 3600
    assert per["cost_usd_per_step"] == pytest.approx(hand, rel=1e-9)
    assert per["cost_usd_per_million_tokens"] == pytest.approx(hand / (4 * LLAMA_TOKENS) * 1e6, rel=1e-9)
    assert doc["price"]["chips"] == V5P_8_CHIPS and doc["price"]["usd_per_chip_hour"] == pytest.approx(V5P_PRICE)
    rc, out, _ = run("step", "llama3-8b", "-t", "tpu-v5p-8", "--megacore", "--global-batch", "4", "--strategy",
                     "sharded")
    assert rc == 0 and "cost a step" in out and "cost per M tokens" in out
    assert "4 chips x step time x $4.20 per chip-hour / 3600" in out


def test_step_of_a_cnn_costs_per_1000_images_not_per_token():
    doc = json_of("step", "resnet50", "-t", "tpu-v3-32", "--strategy", "sharded", schema="step")
    per = doc["strategies"]["sharded"]
    hand = V3_32_CHIPS * per["step_time_s"] * V3_PRICE / 3600
    assert per["cost_usd_per_step"] == pytest.approx(hand, rel=1e-9)
    assert per["cost_usd_per_million_tokens"] is None
    assert per["cost_usd_per_thousand_examples"] == pytest.approx(hand / doc["global_batch"] * 1000, rel=1e-9)
    assert "cost per 1,000 images" in run("step", "resnet50", "-t", "tpu-v3-32", "--strategy", "sharded")[1]


def test_a_price_of_ones_own_replaces_the_chips():
    doc = json_of("step", "resnet50", "-t", "tpu-v3-32", "--strategy", "sharded", "--price-per-chip-hour", "0.9")
    per = doc["strategies"]["sharded"]
    assert per["cost_usd_per_step"] == pytest.approx(V3_32_CHIPS * per["step_time_s"] * 0.9 / 3600, rel=1e-9)
    assert doc["price"]["source"] == "--price-per-chip-hour 0.9"
    rc, _, err = run("step", "resnet50", "-t", "tpu-v3-32", "--price-per-chip-hour", "0")
    assert rc == 2 and err.count("\n") == 1 and "--price-per-chip-hour" in err


def test_a_chip_without_a_price_says_no_price():
    rc, out, _ = run("step", "resnet50", "-t", "torus:4x4", "--strategy", "sharded")
    assert rc == 0 and "cost: no price" in out and "generic" in out
    doc = json_of("step", "resnet50", "-t", "torus:4x4", "--strategy", "sharded", schema="step")
    assert doc["price"]["usd_per_chip_hour"] is None and doc["strategies"]["sharded"]["cost_usd_per_step"] is None


# ---------------------------------------------------------------- plan
def test_plan_costs_its_compute_and_update_times_a_lower_bound():
    doc = json_of("plan", "resnet50", "-t", "tpu-v3-32", schema="plan")
    c = doc["compute"]
    for s, x in doc["strategies"].items():
        seconds = c["fwd_time_s"] + c["bwd_time_s"] + x["update_time_s"]
        assert x["cost_usd_per_step"] == pytest.approx(V3_32_CHIPS * seconds * V3_PRICE / 3600, rel=1e-9), s
    rc, out, _ = run("plan", "resnet50", "-t", "tpu-v3-32")
    assert rc == 0 and "min cost a step" in out and "lower bound" in out


def test_plan_refuses_several_slices_without_search():
    rc, _, err = run("plan", "llama3-8b", "-t", "tpu-v5p-8", "-t", "tpu-v6e-8")
    assert rc == 2 and err.count("\n") == 1 and "-t" in err and "--search" in err


# ---------------------------------------------------------------- plan --search over several slices
CHIP = ("  cores_per_chip: 1\n  peak_bf16_TFLOPs: {peak}\n  hbm_GiB: 96\n  hbm_GBps: 2000\n  link_GBps: 100\n"
        "  hop_latency_us: 1\n  onchip_GBps: 200\n  price_usd_per_chip_hour: {price}\n"
        "  sources:\n    price_usd_per_chip_hour: made up for a test\n")
CHEAP, DEAR = 1.0, 3.0
"""Two made-up chips alike but for their peak and price: dear is twice as fast and three times the
price, so it wins on time and loses on cost (a step at most halves: cost ratio >= 3 / 2)."""


@pytest.fixture()
def two_slices(tmp_path, monkeypatch):
    (tmp_path / "chips.yaml").write_text("cheap:\n" + CHIP.format(peak=400, price=CHEAP)
                                         + "dear:\n" + CHIP.format(peak=800, price=DEAR))
    for name in ("cheap", "dear"):
        (tmp_path / f"{name}-4.yaml").write_text(f"chip: {name}\nchips_per_axis: [2, 2]\nwraparound: false\n")
    (tmp_path / "dear-8.yaml").write_text("chip: dear\nchips_per_axis: [2, 4]\nwraparound: false\n")
    monkeypatch.setenv("WUS_SIM_TOPOLOGY_PATH", str(tmp_path))
    return ("-t", "cheap-4", "-t", "dear-4")


def search(*argv):
    return json_of("plan", "llama3-8b", "--search", "--global-batch", "8", *argv, schema="plan-search")


def test_the_cheaper_slice_wins_on_cost_the_faster_on_time(two_slices):
    by_cost = search(*two_slices, "--rank", "cost")
    price = {"cheap-4": CHEAP, "dear-4": DEAR}
    ok = [c for c in by_cost["candidates"] if c["status"] == "ok"]
    hand = [4 * c["step_time_s"] * price[c["topology"]] / 3600 for c in ok]  # 4 chips a 2x2 slice
    assert hand == sorted(hand)
    assert ok[0]["cost_usd_per_step"] == pytest.approx(min(hand)) and ok[0]["topology"] == "cheap-4"
    by_time = search(*two_slices)
    assert by_time["rank"] == "time" and by_time["candidates"][0]["topology"] == "dear-4"
    assert {c["topology"] for c in ok} == {"cheap-4", "dear-4"}


def test_rank_time_over_slices_is_the_merge_of_each_slices_search(two_slices):
    both = search(*two_slices)
    one = [search(two_slices[0], name)["candidates"] for name in (two_slices[1], two_slices[3])]
    for name, cands in zip(("cheap-4", "dear-4"), one):
        for c in cands:
            c["topology"] = name
    key = ("topology", "mesh", "dcn_mesh", "strategy", "remat", "status", "step_time_s", "mem_peak_bytes")
    merged = sorted((c for cands in one for c in cands if c["status"] == "ok"), key=lambda c: c["step_time_s"])
    assert [tuple(c[k] for k in key) for c in both["candidates"] if c["status"] == "ok"] == \
        [tuple(c[k] for k in key) for c in merged]
    bad = sorted(tuple(str(c[k]) for k in key) for cands in one for c in cands if c["status"] != "ok")
    assert sorted(tuple(str(c[k]) for k in key) for c in both["candidates"] if c["status"] != "ok") == bad
    assert both["global_batch"] == 8 and [t["topology"] for t in both["topologies"]] == ["cheap-4", "dear-4"]


def test_one_global_batch_the_first_slices_default_said_in_the_header(two_slices):
    """cheap-4 (4 devices) runs llama3-8b at 4 sequences by default, dear-8 (8 devices) at 8: searched
    together, every candidate on both runs the first -t's 4."""
    first = json_of("plan", "llama3-8b", "--search", "-t", "cheap-4")
    assert first["global_batch"] == 4 and json_of("plan", "llama3-8b", "--search", "-t", "dear-8")["global_batch"] == 8
    doc = json_of("plan", "llama3-8b", "--search", "-t", "cheap-4", "-t", "dear-8", schema="plan-search")
    assert doc["global_batch"] == 4 and doc["global_batch_source"] == "default"
    for c in doc["candidates"]:
        if c["status"] == "ok":
            axes = dict(a.split("=") for a in c["mesh"].split(","))
            groups = int(axes.get("data", 1)) * int(axes.get("fsdp", 1))
            assert c["per_replica_batch"] * groups == 4, c
    assert {c["topology"] for c in doc["candidates"] if c["status"] == "ok"} == {"cheap-4", "dear-8"}
    rc, out, err = run("plan", "llama3-8b", "--search", *two_slices, "--rank", "cost")
    assert rc == 0, err
    head = out.splitlines()[:3]
    assert "on 2 slices (cheap-4, dear-4)" in head[0] and "for every candidate on every slice" in head[0]
    assert "the workload's default on cheap-4, the first -t" in head[0]
    assert "$1.00 per chip-hour" in head[1] and "made up for a test" in head[1]
    assert "$3.00 per chip-hour" in head[2] and head[2].lstrip().startswith("dear-4")
    # each candidate's line names its slice
    assert all(line.split()[1] in ("cheap-4", "dear-4") for line in out.splitlines() if line[:6].strip().isdigit())


def test_one_price_for_every_slice_when_given(two_slices):
    doc = search(*two_slices, "--rank", "cost", "--price-per-chip-hour", "2")
    ok = [c for c in doc["candidates"] if c["status"] == "ok"]
    assert ok[0]["topology"] == "dear-4"  # one price: the faster slice is the cheaper
    assert all(t["price"]["usd_per_chip_hour"] == 2 for t in doc["topologies"])


def test_rank_cost_refuses_a_chip_without_a_price_naming_it(two_slices):
    rc, out, err = run("plan", "llama3-8b", "--search", *two_slices, "-t", "torus:2x2", "--rank", "cost")
    assert rc == 2 and not out and err.count("\n") == 1
    assert "--rank cost" in err and "chip generic" in err and "--price-per-chip-hour" in err
    rc, out, _ = run("plan", "llama3-8b", "--search", "-t", "torus:2x2", "--global-batch", "4")
    assert rc == 0 and "no price" in out  # --rank time: the cost columns say so, the ranking runs


def test_several_slices_refuse_a_per_replica_batch(two_slices):
    rc, _, err = run("plan", "llama3-8b", "--search", *two_slices, "--per-replica-batch", "2")
    assert rc == 2 and err.count("\n") == 1 and "--global-batch" in err


def test_shipped_slices_are_ranked_by_their_cited_prices():
    """The issue's command in small: v5p-8 and v6e-8 ranked by cost, each price cited (slow form below)."""
    rc, out, err = run("plan", "llama3-8b", "--search", "--rank", "cost", "-t", "tpu-v5p-8", "-t", "tpu-v6e-8",
                       "--global-batch", "8")
    assert rc == 0, err
    lines = out.splitlines()
    assert "$4.20 per chip-hour" in lines[1] and "read 2026-12-07" in lines[1]
    assert "$2.70 per chip-hour" in lines[2] and "cloud.google.com/tpu/pricing" in lines[2]
    assert "$/M tok" in lines[3] and "cheapest first" in lines[0]


@pytest.mark.slow
def test_the_issues_command_ranks_v5e_v5p_and_v6e_by_price_per_million_tokens():
    doc = json_of("plan", "llama3-8b", "--search", "--rank", "cost", "-t", "tpu-v5e-256", "-t", "tpu-v5p-256",
                  "-t", "tpu-v6e-256", schema="plan-search")
    ok = [c for c in doc["candidates"] if c["status"] == "ok"]
    per_m = [c["cost_usd_per_million_tokens"] for c in ok]
    assert per_m == sorted(per_m) and {c["topology"] for c in ok} == {"tpu-v5e-256", "tpu-v5p-256", "tpu-v6e-256"}
    assert all(t["price"]["usd_per_chip_hour"] and t["price"]["source"] for t in doc["topologies"])
