"""``wus-sim import-workload PATH [--sequence-length N] [--name NAME] [--out FILE]``: a workload
file from a Hugging Face ``config.json``, a safetensors checkpoint's headers or a MaxText model file.

PATH is a ``config.json``, a ``.safetensors`` file, a ``model.safetensors.index.json`` or a folder
holding them (a checkpoint needs the ``config.json`` beside it); nothing is downloaded and of a
checkpoint only the headers are read (:mod:`wus_sim.model.importers.importers`). A ``.yml``/``.yaml``
PATH (or a JSON without ``model_type`` whose keys are MaxText's) is a MaxText model file (``configs/models/NAME.yml``, or ``base_*`` keys with
``global_parameter_scale``: :mod:`wus_sim.model.importers.maxtext_model`). The YAML goes to FILE, or
to stdout; ``wus-sim describe workload FILE`` and every other command read it.
"""

import sys

__all__ = ["add_parser", "run"]


def add_parser(subparsers):
    p = subparsers.add_parser(
        "import-workload", help="write a workload file from a Hugging Face config.json, safetensors headers or a "
                                "MaxText model file",
        description="Write a workload file (tensors, layers, FLOPs, activation terms, dtypes) from a Hugging "
                    "Face config.json (model_type llama, mistral, qwen2, gemma, gemma2, phi3, mixtral, deepseek_v2, gpt2, "
                    "gpt_neox, bert, t5 or vit; docs/importing-models.md), "
                    "from a safetensors file / model.safetensors.index.json with the config.json beside it "
                    "(headers only), or from a MaxText model file (.yml: configs/models/NAME.yml, or base_* keys "
                    "with global_parameter_scale; docs/maxtext-models.md). Nothing is downloaded.")
    p.add_argument("path", metavar="PATH", help="config.json, .safetensors, model.safetensors.index.json, a folder, "
                                                "or a MaxText model .yml")
    p.add_argument("--sequence-length", dest="sequence_length", type=int, default=None, metavar="N",
                   help="tokens per sequence (default: min(the config's max_position_embeddings / n_positions, 4096); "
                        "ViT: its patches + 1, set by the config; a MaxText file: its max_target_length, else 2048)")
    p.add_argument("--name", default=None, help="workload name (default: the model's name, folder or file)")
    p.add_argument("--out", default=None, metavar="FILE", help="write the YAML here (default: stdout)")
    return p


def run(args):
    from ..inputs.errors import ConfigError
    from ..inputs.files import check_writable_file
    from ..inputs.writes import write_atomic
    from ..model.importers.importers import import_workload
    from ..model.workload_files import workload_from_text

    if args.out is not None:  # before any work: a folder, FIFO or read-only place is known now
        if not args.out:
            raise ConfigError("is not a file name (it is empty)", key_path="--out", value="")
        check_writable_file(args.out, what="workload file", named_by="--out")
    try:
        text = import_workload(args.path, sequence_length=args.sequence_length, name=args.name)
    except ConfigError as exc:
        if exc.key_path == "sequence_length" and exc.file is None:
            raise exc.at("--sequence-length") from None
        raise
    # The workload every other command will read, checked by load_workload's own rules before a
    # byte is written: a model whose sizes pass the importer but not the workload file's rules
    # is refused here, never written out as a file that describe workload then refuses.
    try:
        w = workload_from_text(text, file=args.out or "<stdout>")
    except ConfigError as exc:
        raise ConfigError(f"gives a workload that breaks a rule of workload files ({exc})", file=args.path) from None
    if args.out is None:
        write_stdout(text)
        return 0
    write_atomic(args.out, text, what="workload file", named_by="--out")
    print(f"wrote {args.out}: {w.name}, {w.params:,} parameters in {len(w.tensors)} tensors over "
          f"{w.num_layers} layers, {w.fwd_flops_per_unit / 1e9:.3g} GFLOP forward per token at "
          f"{w.units_per_example} {w.flops_unit}s per {w.example_unit}", file=sys.stderr)
    for topic in ("sequence", "notes"):
        if topic in w.sources:
            print(f"  {topic}: {w.sources[topic]}", file=sys.stderr)
    return 0


def write_stdout(text):
    """*text* to stdout as UTF-8 whatever the locale (a workload file is UTF-8: a non-ASCII
    name under ``PYTHONIOENCODING=ascii`` is not an encoding error); a closed stdout is one line."""
    from ..inputs.errors import ConfigError

    if sys.stdout is None:
        raise ConfigError("stdout is closed; give --out FILE", key_path="PATH")
    stream = getattr(sys.stdout, "buffer", None)
    if stream is None:  # a text stream of the caller's (a test's StringIO): it takes text
        sys.stdout.write(text)
        return
    sys.stdout.flush()
    stream.write(text.encode("utf-8"))
