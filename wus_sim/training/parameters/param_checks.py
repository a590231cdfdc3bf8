"""The check every point parameter's value goes through (:func:`check_param`), wherever it comes
from: experiment files, command-line options, the Python API and every point of a sweep. Its
table of parameters is :data:`wus_sim.training.parameters.params.POINT_KEYS`; values that passed are kept,
since a sweep checks the same few values of each key at every point."""

import math

from ...inputs.errors import ConfigError, UnknownNameError
from ...inputs.memo import IdentityMemo

__all__ = ["check_param"]


def check_param(param, value, *, file=None, key_path=None, base_dir=None, option=False):
    """Validate *value* against *param*'s kind and declared range (the one check that
    YAML points and command-line options alike go through); return it normalised.
    *option*: the value came from the command line (the rule then does not offer null)."""
    check = lambda: _check_param(param, value, file, key_path, base_dir, option)  # noqa: E731
    # not kept: a name (its check may look at files), a wrap list (returned as a new list), and a
    # float zero (-0.0 equals 0.0 but is kept as it is); an unhashable value is checked afresh
    if param.kind in ("name", "wrap") or (type(value) is float and value == 0):
        return check()
    return _CHECKED.get((param,), (option, type(value), value), check)


_CHECKED = IdentityMemo(maxsize=4096)
"""Values that passed :func:`check_param`, by parameter, origin and the value with its type (errors
are not kept): a sweep checks the same few values of every key at every point."""


def _check_param(param, value, file, key_path, base_dir, option):
    from ...inputs.api_args import plain

    key_path = key_path or param.name
    raw = value
    value = plain(value)  # numpy scalars follow their value (np.int64(3) is 3, np.bool_ a bool)

    def bad(rule=None):
        return ConfigError(f"must be {rule or param.rule(option=option)}", file=file, key_path=key_path, value=raw)

    if value is None:
        if param.required or not param.nullable:
            raise bad()
        return None
    kind = param.kind
    if kind == "name":
        try:
            return param.check(value, base_dir)
        except ConfigError as exc:
            shown = exc.value if exc.value is not None else value  # e.g. the bad part of 'clip+adam'
            raise ConfigError(exc.rule, file=file, key_path=key_path, value=shown) from None
        except UnknownNameError as exc:
            raise ConfigError(f"is not a known {exc.kind}{exc.hint()}",
                              file=file, key_path=key_path, value=value) from None
    if kind == "choice":
        if not _hashable(value) or value not in param._choices():
            raise bad()
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise bad()
        return value
    if kind == "wrap":
        if isinstance(value, bool):
            return value
        if (isinstance(value, list) and 1 <= len(value) <= 3
                and all(isinstance(v, bool) for v in value)):
            return list(value)
        raise bad()
    if isinstance(value, str):  # e.g. per_replica_batch: "16" in YAML: quoted, so text
        raise ConfigError(f"is text, not a number (write it without quotes); must be {param.rule(option=option)}",
                          file=file, key_path=key_path, value=raw)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad()
    if not _finite(value):
        raise bad("a finite number")
    if kind == "int":
        if isinstance(value, float):
            if not value.is_integer():
                raise bad()
            value = int(value)
    else:
        value = float(value)
    if param.positive and not value > 0:
        raise bad()
    if param.minimum is not None and value < param.minimum:
        raise bad()
    if param.maximum is not None and value > param.maximum:
        raise bad()
    return value


def _finite(value):
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an int such as 10**400
        return False


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        return False
    return True
