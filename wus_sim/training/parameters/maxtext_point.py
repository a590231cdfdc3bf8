"""The point key ``maxtext``: a MaxText run as one experiment point's input (sweepable like any
point key), checked when the experiment is read and translated when the point runs.

The value is a mapping of MaxText keys (base.yml's, as a MaxText YAML config gives them) or its
``KEY=VALUE`` words; it is kept as its words (:func:`maxtext_text`), so a sweep's points and a
results column hold one text. When a point runs, :func:`point_with_maxtext` translates it on the
point's slice (:func:`~.maxtext.translate`): the point keys it sets take the run's values, and
a point key set to a value other than its default is an option given beside the run (kept where
the run left that MaxText key at base.yml's default, an error naming both where it gives it).
``maxtext_approximate: true`` runs the keys wus-sim only approximates (``--maxtext-approximate``).
"""

from functools import lru_cache

from ...inputs.errors import ConfigError
from .maxtext_keys import maxtext_input

__all__ = ["maxtext_text", "point_with_maxtext", "MAXTEXT_SCHEMA"]

MAXTEXT_SCHEMA = {"anyOf": [
    {"type": "object", "minProperties": 1, "propertyNames": {"pattern": "^[a-z][a-z0-9_]*$"}},
    {"type": "string", "minLength": 1}]}
"""JSON Schema of a ``maxtext`` value: a mapping of MaxText keys, or their ``KEY=VALUE`` words."""


def maxtext_text(value):
    """*value* (a mapping of MaxText keys, or their words) as its ``KEY=VALUE`` words, its keys checked
    against base.yml (an unknown one is a ConfigError)."""
    if isinstance(value, dict):
        if not value:
            raise ConfigError("must name at least one MaxText key", key_path="maxtext", value=value)
        words = [_pair(k, v) for k, v in value.items()]
        inp = maxtext_input(words=[" ".join(words)])
    elif isinstance(value, str) and value.strip():
        inp = maxtext_input(words=[value])
    else:
        raise ConfigError("must be a mapping of MaxText keys to values, or their KEY=VALUE words",
                          key_path="maxtext", value=value)
    return inp.words()


def _pair(key, value):
    from .maxtext_keys import MaxTextInput

    if not isinstance(key, str):
        raise ConfigError("must be a MaxText key (text)", key_path="maxtext", value=key)
    return MaxTextInput({key: value}).words()  # the value as its word, quoted where it must be


def point_with_maxtext(point, point_keys):
    """``(point, custom_mesh)``: *point* with its ``maxtext`` run translated into its point keys
    (itself without one), and the MaxText ring layout the run's mesh takes (``None``: JAX's; it is
    no point key, the run's ``custom_mesh`` alone sets it); *point_keys* the point parameters'
    table (``{name: Param}``: their defaults say which keys the point set itself)."""
    text = point.get("maxtext")
    if text is None:
        return point, None
    explicit = tuple(sorted((k, v) for k, v in point.items()
                            if k in _SET and v is not None and k in point_keys and v != point_keys[k].default))
    translated, custom_mesh = _translated(maxtext_text(text), point.get("topology"), explicit,
                                          bool(point.get("maxtext_approximate")), frozenset(point_keys))
    return {**point, **translated}, custom_mesh


_SET = ("workload", "global_batch", "per_replica_batch", "mesh", "dcn_mesh", "slices", "megacore", "remat",
        "remat_policy", "quantization", "optimizer", "grad_dtype", "strategy", "capacity_factor")
"""The point keys a MaxText run sets (the others are the point's alone)."""


@lru_cache(maxsize=256)
def _translated(text, topology, explicit, approximate, point_keys):
    """The point keys of one MaxText run on one slice (a sweep's points repeat a few of them)."""
    from .maxtext import translate

    if not isinstance(topology, str):
        raise ConfigError("is required: a point names its topology", key_path="topology", show_value=False)
    run = translate(maxtext_input(words=[text]), topology, approximate=approximate, point_keys=point_keys,
                    explicit={k: (v, f"{k}: {v}") for k, v in explicit})
    return dict(run.point), run.custom_mesh
