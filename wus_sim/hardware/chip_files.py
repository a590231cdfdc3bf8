"""chips.yaml's format: the key table a chip is checked by, and reading one chips file into
:class:`~wus_sim.hardware.chips.Chip` objects (:func:`wus_sim.hardware.topology_files.load_chips`
lays the files of the search path over each other)."""

from ..inputs.config import Section, load_yaml
from ..inputs.errors import ConfigError
from ..inputs.keys import Key, KeyTable
from ..inputs.limits import RATE_RANGES
from ..inputs.text import short_repr
from ..inputs.units import GB, GiB, US
from .chips import Chip

__all__ = ["CHIP_KEYS", "CHIPS_FILE", "chips_from_file", "sources_of", "LINK_MEANING", "HOP_MEANING",
           "ONCHIP_MEANING"]


_SOURCES_SCHEMA = {"type": "object", "additionalProperties": {"type": "string"}}

LINK_MEANING = ("ICI bandwidth of one link in one direction (10^9 B/s). A datasheet's per-chip bidirectional "
                "total is divided by the chip's links (2 per torus axis: 4 in 2-D, 6 in 3-D) and by 2 directions "
                "(v5p: 1200 / 6 / 2 = 100); Gbps / 8 = GB/s. A bidirectional ring runs both directions, each at "
                "this rate. See docs/chips.md.")
HOP_MEANING = ("Fixed time per ICI hop besides bytes / link_GBps: the alpha of the alpha-beta cost, paid per ring "
               "step and hop; it dominates small collectives (norms, batch-norm statistics). Rarely published "
               "(about 1 us: the JAX scaling book's working figure).")
ONCHIP_MEANING = ("Bandwidth between two cores of one chip, one direction (10^9 B/s): the first ring level of a "
                  "collective when a chip runs one replica per core. Unused with one core or one replica per chip, "
                  "but required (the link figure will do if none is known).")

CHIP_KEYS = KeyTable("chip", [
    Key("description", "string", "One line on the chip.", default=""),
    Key("cores_per_chip", "integer", "TensorCores per chip. One data-parallel replica runs on each core and gets "
        "1/cores_per_chip of the chip's HBM, HBM bandwidth and peak, unless a topology's cores_per_chip or "
        "--megacore (TPU v4/v5p) says one replica per chip.", required=True, minimum=1, maximum=64),
    Key("peak_bf16_TFLOPs", "number", "Dense matrix-unit peak of the whole chip in bf16 (10^12 FLOP/s, not the "
        "sparse figure); compute time is FLOPs / (a replica's share x the calibration's MXU efficiency).",
        unit="TFLOP/s", required=True,
        minimum=RATE_RANGES["peak_bf16_TFLOPs"][0], maximum=RATE_RANGES["peak_bf16_TFLOPs"][1]),
    Key("peak_int8_TOPs", "number", "Matrix-unit peak of the chip in int8 (10^12 operations/s): the weight matmuls' "
        "peak under point key `quantization: int8` (cite it in `sources`).", unit="TOP/s", positive=True,
        default_text="none: the chip cannot run quantization int8 (a one-line error)"),
    Key("peak_fp8_TFLOPs", "number", "Matrix-unit peak of the chip in fp8 (10^12 FLOP/s), where the Cloud TPU "
        "docs give one (cite it in `sources`): recorded with its source; no step runs in fp8 yet.",
        unit="TFLOP/s", positive=True, default_text="none"),
    Key("hbm_GiB", "number", "HBM capacity of the whole chip (2^30 B; datasheets' HBM 'GB' are GiB), split "
        "evenly over its cores: what a replica's weights, gradients, slots and activations must fit in.",
        unit="GiB", required=True,
        minimum=RATE_RANGES["hbm_GiB"][0], maximum=RATE_RANGES["hbm_GiB"][1]),
    Key("hbm_GBps", "number", "HBM bandwidth of the whole chip (10^9 B/s), split evenly over its cores: the speed "
        "of memory-bound work (the optimizer update, elementwise ops).", unit="GB/s", required=True,
        minimum=RATE_RANGES["hbm_GBps"][0], maximum=RATE_RANGES["hbm_GBps"][1]),
    Key("link_GBps", "number", LINK_MEANING, unit="GB/s", required=True,
        minimum=RATE_RANGES["link_GBps"][0], maximum=RATE_RANGES["link_GBps"][1]),
    Key("hop_latency_us", "number", HOP_MEANING, unit="us", required=True, minimum=0),
    Key("onchip_GBps", "number", ONCHIP_MEANING, unit="GB/s", required=True,
        minimum=RATE_RANGES["onchip_GBps"][0], maximum=RATE_RANGES["onchip_GBps"][1]),
    Key("dcn_GBps", "number", "Data-center network bandwidth per chip, one direction (10^9 B/s): the default of a "
        "multislice of this chip (cite it in `sources`).", unit="GB/s", minimum=RATE_RANGES["dcn_GBps"][0], maximum=RATE_RANGES["dcn_GBps"][1],
        default_text="none: a multislice takes 6.25 GB/s, an assumption that step and describe print"),
    Key("mxus_per_core", "integer", "Matrix units (MXUs) per TensorCore (cite it in `sources`).", minimum=1,
        maximum=64, default_text="none: no tile padding in the compute model"),
    Key("mxu_dim", "integer", "Side of one MXU's systolic array (128 on TPU v2-v5p, 256 on v6e): a matmul's "
        "dimensions are padded to multiples of it (cite it in `sources`).", minimum=8, maximum=4096,
        default_text="none: no tile padding in the compute model"),
    Key("host_GBps", "number", "Host link (PCIe) bandwidth per chip, one direction (10^9 B/s): what activations "
        "offloaded to host memory move at (cite it in `sources`).", unit="GB/s",
        minimum=RATE_RANGES["dcn_GBps"][0], maximum=RATE_RANGES["dcn_GBps"][1],
        default_text="none: remat policies that offload to the host are refused on this chip"),
    Key("megacore", "boolean", "JAX presents the chip's TensorCores as one device (megacore; cite it in "
        "`sources`): a run places one replica per chip over all its TensorCores by default, as JAX counts "
        "devices; `--no-megacore` (point key `megacore: false`) runs one replica per TensorCore.", default=False),
    Key("price_usd_per_chip_hour", "number", "Public on-demand price of one chip for an hour, US dollars (cite the "
        "pricing page, region and date read in `sources`): the cost of a step is chips x step time x this / 3600. "
        "`--price-per-chip-hour` (point key `price_usd_per_chip_hour`) sets another for a run, e.g. a "
        "committed-use price.", unit="USD/chip-hour", positive=True, maximum=1e4,
        default_text="none: step and plan print \"no price\" and plan --search --rank cost refuses the chip"),
    Key("sources", "mapping", "Citation per figure: figure key -> where the value comes from.",
        schema=_SOURCES_SCHEMA),
], meaning="One chip model's datasheet figures; a topology file names it with `chip`.")
"""Keys of one chip of ``chips.yaml`` (read by :func:`load_chips`)."""

CHIPS_FILE = KeyTable("chips file", [], extra=CHIP_KEYS.json_schema(),
                      meaning="chips.yaml: chip name -> the chip's figures (every key a chip name). User "
                              "chips.yaml files on WUS_SIM_TOPOLOGY_PATH add chips; a chip of the same name "
                              "replaces the shipped one (and a note says so).")
"""The chips file: a mapping of chip names to :data:`CHIP_KEYS` mappings."""


def chips_from_file(path):
    """The chips of one chips.yaml file, keyed by name."""
    doc = Section(load_yaml(path), file=path)
    chips = {}
    for name in doc.keys():
        if not isinstance(name, str) or not name:
            raise ConfigError("is not a chip name: every top-level key of a chips file is a chip's name (text)",
                              file=path, key_path=short_repr(name))
        sec = doc.section(name)
        CHIP_KEYS.check(sec)
        CHIP_KEYS.read(sec, "description")  # not kept, but held to its rule like every key
        read = lambda key: CHIP_KEYS.read(sec, key)
        chips[name] = Chip(
            name=name,
            cores_per_chip=read("cores_per_chip"),
            peak_flops=read("peak_bf16_TFLOPs") * 1e12,
            hbm_bytes=read("hbm_GiB") * GiB,
            hbm_Bps=read("hbm_GBps") * GB,
            link_Bps=read("link_GBps") * GB,
            hop_latency_s=read("hop_latency_us") * US,
            onchip_Bps=read("onchip_GBps") * GB,
            dcn_Bps=read("dcn_GBps") * GB if "dcn_GBps" in sec else None,
            peak_int8_ops=read("peak_int8_TOPs") * 1e12 if "peak_int8_TOPs" in sec else None,
            peak_fp8_flops=read("peak_fp8_TFLOPs") * 1e12 if "peak_fp8_TFLOPs" in sec else None,
            mxus_per_core=read("mxus_per_core") if "mxus_per_core" in sec else None,
            mxu_dim=read("mxu_dim") if "mxu_dim" in sec else None,
            host_Bps=read("host_GBps") * GB if "host_GBps" in sec else None,
            megacore=read("megacore"),
            price_usd_per_chip_hour=read("price_usd_per_chip_hour") if "price_usd_per_chip_hour" in sec else None,
            sources=sources_of(sec),
        )
    return chips


def sources_of(sec):
    """The ``sources`` mapping (topic -> citation) of a spec; any other shape is an error."""
    value = sec.get("sources", {}) or {}
    if not isinstance(value, dict):
        raise sec.error("sources", "must be a mapping of topic to citation", value)
    return dict(value)
