"""A TPU chip's figures: cores, peak rates, HBM, ICI links (the static data a slice is built of)."""

from dataclasses import dataclass, field



__all__ = ["Chip"]


@dataclass(frozen=True)
class Chip:
    """One accelerator chip's datasheet figures, in SI units."""

    name: str
    cores_per_chip: int
    peak_flops: float
    """Matrix-unit peak (bf16) of the whole chip, FLOP/s."""
    hbm_bytes: float
    """HBM capacity of the whole chip, bytes (shared evenly by its cores)."""
    hbm_Bps: float
    """HBM bandwidth of the whole chip, bytes/s (its cores share it)."""
    link_Bps: float
    """Default ICI bandwidth of one link, one direction, bytes/s."""
    hop_latency_s: float
    """Default per-hop ICI latency, seconds."""
    onchip_Bps: float
    """Core-to-core bandwidth inside the chip, one direction, bytes/s."""
    dcn_Bps: float = None
    """Data-center network bandwidth of one chip, one direction, bytes/s: a multislice's default
    (``None``: chips.yaml gives none; a multislice then takes an assumption and says so)."""
    peak_int8_ops: float = None
    """Matrix-unit peak of the whole chip in int8, operations/s (``None``: chips.yaml gives none,
    and the chip cannot run ``quantization: int8``)."""
    peak_fp8_flops: float = None
    """Matrix-unit peak of the whole chip in fp8, FLOP/s (``None``: chips.yaml gives none). Recorded
    for reports; no step runs in fp8 yet."""
    mxus_per_core: int = None
    """Matrix units (MXUs) per TensorCore (``None``: chips.yaml gives none; the compute model
    then takes no tile padding into account)."""
    mxu_dim: int = None
    """Side of one MXU's systolic array: a matmul's contraction and output dimensions are padded
    to multiples of it (128 on TPU v2-v5p, 256 on v6e; ``None``: not given)."""
    host_Bps: float = None
    """Host link (PCIe) bandwidth of one chip, one direction, bytes/s: what activations offloaded
    to host memory move at (``None``: chips.yaml gives none; offloading is then refused)."""
    megacore: bool = False
    """Whether JAX presents the chip's TensorCores as one device by default (megacore: TPU v4 and v5p):
    a run then places one replica per chip unless it asks for TensorCores (``--no-megacore``)."""
    price_usd_per_chip_hour: float = None
    """Public on-demand price of one chip for an hour, US dollars (``None``: chips.yaml gives none;
    a step's cost is then "no price"). Not SI: a price is quoted per chip-hour, and said so."""
    sources: dict = field(default_factory=dict, compare=False, hash=False)
    """Where each figure came from (key -> citation), for reports."""
