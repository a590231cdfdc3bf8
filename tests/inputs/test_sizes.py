"""Sizes have one grammar: plain bytes, decimal (KB..TB, 10^3 steps) or binary (KiB..TiB,
2^10 steps). A bare K/M/G/T (or Ki/Mi/...) is an error naming both readings."""

import pytest
from hypothesis import given, strategies as st

from wus_sim.cli import main
from wus_sim.collectives import collective_time
from wus_sim.inputs.errors import ConfigError
from wus_sim.inputs.units import parse_size

DECIMAL = {"B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4}
BINARY = {"KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}


@pytest.mark.parametrize("text, nbytes", [
    ("67108864", 67108864), ("64MiB", 67108864), ("64MB", 64_000_000), ("1.5GB", 1_500_000_000),
    ("1GiB", 1073741824), ("2KiB", 2048), ("512B", 512), ("64 MiB", 67108864), ("64mib", 67108864),
    (4096, 4096),
])
def test_the_grammar(text, nbytes):
    assert parse_size(text) == nbytes


@given(n=st.integers(1, 1000), unit=st.sampled_from(sorted({**DECIMAL, **BINARY})))
def test_every_unit_is_its_power(n, unit):
    assert parse_size(f"{n}{unit}") == n * {**DECIMAL, **BINARY}[unit]


@pytest.mark.parametrize("suffix, binary, decimal", [
    ("K", 2**10, 10**3), ("k", 2**10, 10**3), ("M", 2**20, 10**6), ("m", 2**20, 10**6),
    ("G", 2**30, 10**9), ("T", 2**40, 10**12), ("Mi", 2**20, 10**6), ("Gi", 2**30, 10**9),
])
def test_a_bare_suffix_says_both_readings(suffix, binary, decimal):
    with pytest.raises(ConfigError) as err:
        parse_size(f"3{suffix}", name="--size")
    message = str(err.value)
    letter = suffix[0].upper()
    assert "--size" in message and "ambiguous" in message
    assert f"probably meant 3{letter}iB = {3 * binary:,} bytes" in message
    assert f"3{letter}B = {3 * decimal:,} bytes" in message


def test_the_python_api_refuses_a_bare_suffix_too():
    with pytest.raises(ConfigError, match="64MiB"):
        collective_time("torus:4x4", "all-reduce", "ring", "64M")


def test_the_command_line_exits_2_with_one_line(capsys):
    code = main(["collective", "torus:4x4", "--op", "all-reduce", "--algorithm", "ring", "--size", "64M"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "64MiB" in err and "64MB" in err


@pytest.mark.parametrize("text", ["12parsecs", "64MBs", "M", "-3", "0", "1.5B", "64 M B"])
def test_other_bad_sizes(text):
    with pytest.raises(ConfigError):
        parse_size(text)
