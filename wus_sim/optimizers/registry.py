"""Finding optimizers by name: the shipped YAML programs, user directories and paths.

Names are file stems in :func:`optimizer_dirs`. A spec may add prefixes with
``+``: ``adam+clip`` is Adam with global-norm clipping in front. A path to a
YAML file works wherever a name does (``./my_opt.yaml``, ``my_opt.yaml+clip``).
"""

from functools import lru_cache
from pathlib import Path
import os

from ..inputs.config import is_file, load_yaml
from ..inputs.files import check_file
from ..inputs.errors import ConfigError, UnknownNameError, WusError
from ..inputs.text import short_repr
from ..inputs.memo import fixed_while_running
from .spec import Optimizer, compose, parse_optimizer

__all__ = ["known_optimizers", "known_prefixes", "load_optimizer", "optimizer_dirs",
           "OPTIMIZER_PATH_ENV"]

OPTIMIZER_PATH_ENV = "WUS_SIM_OPTIMIZER_PATH"
"""Extra directories (``os.pathsep``-separated) searched before the shipped optimizers."""

_SHIPPED = Path(__file__).resolve().parent.parent / "data" / "optimizers"


def optimizer_dirs():
    """Directories searched for ``NAME.yaml``, first match wins."""
    extra = [Path(p) for p in os.environ.get(OPTIMIZER_PATH_ENV, "").split(os.pathsep) if p]
    return extra + [_SHIPPED]


def _files():
    found = {}
    for d in optimizer_dirs():
        if os.path.isdir(d):  # False, not OSError, for a name the OS refuses
            for p in sorted(d.glob("*.yaml")):
                found.setdefault(p.stem, p)
    return found


def known_optimizers():
    """Names of the optimizers found (not prefixes), sorted."""
    return sorted(n for n, p in _files().items() if _kind_of(p) == "optimizer")


def known_prefixes():
    """Names of the gradient prefixes found (e.g. ``'clip'``), sorted; add one with ``+NAME``."""
    return sorted(n for n, p in _files().items() if _kind_of(p) == "prefix")


def _kind_of(path):
    # Listing names must not fail, or say anything, because of one unrelated or broken file in
    # a search directory: such a file is left out of the list (loading it by name reports it).
    try:
        return _load_file(path).kind
    except (WusError, OSError):
        return None


@fixed_while_running
def load_optimizer(spec):
    """An :class:`Optimizer` from a name (``'adam'``), a composition (``'adam+clip'``) or a path.

    Unknown names raise :class:`UnknownNameError` listing the known ones
    (prefixes shown as ``+clip``); bad files raise :class:`ConfigError`.
    """
    if isinstance(spec, Optimizer):
        return spec
    spec = str(spec).strip()
    if _is_path(spec) and is_file(spec):
        opt = _load_file(Path(spec))
        if opt.kind != "optimizer":
            raise ConfigError(f"is a gradient prefix, not an optimizer; combine it as e.g. adam+{spec}",
                              key_path="optimizer", value=spec)
        return opt
    base, *prefixes = spec.split("+")
    opt = _load_one(base)
    if not prefixes:
        if opt.kind != "optimizer":
            raise ConfigError(f"is a gradient prefix, not an optimizer; combine it as e.g. adam+{opt.name}",
                              key_path="optimizer", value=spec)
        return opt
    parts = []
    for p in prefixes:
        try:
            parts.append(_load_one(p))
        except UnknownNameError:
            # name the whole composition and what a part after '+' may be
            raise ConfigError(f"has an unknown gradient prefix {short_repr(p)} after '+'; known prefixes: "
                              f"{', '.join(known_prefixes())} (e.g. {base}+{next(iter(known_prefixes()), 'clip')})",
                              key_path="optimizer", value=spec) from None
    return compose(opt, parts)


def _is_path(text):
    return text.endswith((".yaml", ".yml")) or os.sep in text or "/" in text


def _load_one(text):
    if not text:
        raise ConfigError("has an empty part; write e.g. adam or adam+clip", key_path="optimizer", value=text)
    if _is_path(text):
        path = Path(text)
        check_file(path, what="optimizer file", named_by="optimizer")
        return _load_file(path)
    path = _files().get(text)
    if path is None:
        known = known_optimizers() + [f"+{p}" for p in known_prefixes()]
        raise UnknownNameError("optimizer", text, known)
    return _load_file(path)


def _load_file(path):
    st = check_file(path, what="optimizer file", named_by="optimizer")  # before resolve(): a loop raises there
    return _cached(str(Path(path).resolve()), st.st_mtime_ns)


@lru_cache(maxsize=64)
def _cached(path, mtime_ns):
    # Keyed by modification time so an edited user file is read again.
    return parse_optimizer(load_yaml(path), name=Path(path).stem, file=path)
