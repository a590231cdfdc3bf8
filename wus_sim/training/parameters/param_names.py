"""Checks of the point parameters that name an input (workload, optimizer, topology,
calibration, link faults): the named file or shipped entry must load."""

from pathlib import Path

from ...inputs.config import present
from ...inputs.errors import ConfigError, UnknownNameError

__all__ = []


# ---------------------------------------------------------------- name checks
def _existing_path(text, base_dir):
    """*text* as an existing YAML file (relative to cwd, then to *base_dir*), or None."""
    if not text.endswith((".yaml", ".yml")) and "/" not in text:
        return None
    for candidate in (Path(text), (Path(base_dir) / text) if base_dir else None):
        if candidate is not None and present(candidate):
            return candidate if candidate == Path(text) else candidate.resolve()
    raise ConfigError("file not found", value=text)


def _loads(kind, load, spec, value):
    """Load the file *spec* names with *load*, so that its errors are the experiment's (exit 2
    before the sweep, the file and its key path in the message), not error rows after it."""
    try:
        load(spec)
    except ConfigError as exc:
        raise ConfigError(f"is a {kind} file that does not load: {exc}", value=value) from None


def _check_workload(value, base_dir):
    if not isinstance(value, str) or not value:
        raise ConfigError("must be a workload name or a path to a workload YAML file", value=value)
    path = _existing_path(value, base_dir)
    from ...model.importers.maxtext_model import resolve_workload, split_length
    from ...model.workload_files import known_workloads

    if path is None and split_length(value)[1] is not None:  # a MaxText library model rebuilt at TOKENS
        resolve_workload(value)
        return value
    if path is None and value not in known_workloads():
        raise UnknownNameError("workload", value, known_workloads())
    spec = value if path is None else str(path)
    _loads("workload", resolve_workload, spec, value)
    return spec


def _check_optimizer(value, base_dir):
    if not isinstance(value, str) or not value:
        raise ConfigError("must be an optimizer name (adam, adam+clip) or a path to an optimizer YAML file",
                          value=value)
    path = _existing_path(value, base_dir)
    from ...optimizers import load_optimizer

    # Loading checks compositions (adam+clip) and files the same way the simulator will read them.
    try:
        load_optimizer(str(path) if path is not None else value)
    except ConfigError as exc:
        raise ConfigError(exc.rule, value=exc.value if exc.value is not None else value) from None
    return str(path) if path is not None else value


def _check_topology(value, base_dir):
    if not isinstance(value, str) or not value:
        raise ConfigError("must be a topology name, a path, or inline torus:16x16 / mesh:8x8 / torus:8x8x8",
                          value=value)
    from ...hardware.topology_files import known_topologies, parse_inline

    if value.startswith(("torus:", "mesh:")):
        if parse_inline(value) is None:
            raise ConfigError("must look like torus:32x32, mesh:8x8 or torus:4x4x4 (1 to 3 axes)", value=value)
        return value
    path = _existing_path(value, base_dir)
    if path is None and value not in known_topologies():
        raise UnknownNameError("topology", value, known_topologies())
    from ...hardware.multislice import load_multislice  # the slice and its file's multislice section

    spec = value if path is None else str(path)
    _loads("topology", load_multislice, spec, value)
    return spec


def _check_calibration(value, base_dir):
    if not isinstance(value, str) or not value:
        raise ConfigError("must be a calibration name (default, none) or a path to a calibration YAML", value=value)
    path = _existing_path(value, base_dir)
    from ...model.calibration import load_calibration

    load_calibration(str(path) if path is not None else value)
    return str(path) if path is not None else value


def _check_failed_links(value, base_dir):
    """A count K (random cables) or a cable list; which chips exist is checked when the
    point's topology is loaded."""
    from ...hardware.link_faults import MAX_RANDOM_CABLES, split_cables

    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value <= MAX_RANDOM_CABLES:
            raise ConfigError(f"must be a count from 0 to {MAX_RANDOM_CABLES} or cables such as 12+x,40-y",
                              value=value)
        return value
    if not isinstance(value, str):
        raise ConfigError("must be a count K or comma-separated cables such as 12+x,40-y", value=value)
    split_cables(value, key_path=None)
    return value.strip()


def _check_slow_links(value, base_dir):
    from ...hardware.link_faults import split_slow_links

    head, _ = split_slow_links(value if isinstance(value, str) else repr(value))
    try:
        _check_failed_links(head, base_dir)
    except ConfigError as exc:
        raise ConfigError(exc.rule, value=value) from None
    return value.strip()


def _check_software_stack(value, base_dir):
    """A stack name: a word of letters, digits, dots and dashes (which stacks a calibration
    knows is checked where the calibration is applied, since the calibration is another key)."""
    import re

    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}", value):
        raise ConfigError("must be a software stack name (letters, digits, '.', '+', '_', '-'; at most 64)",
                          key_path="software_stack", value=value)
    return value
