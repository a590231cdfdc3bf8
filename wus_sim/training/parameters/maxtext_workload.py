"""The workload of a MaxText run: ``model_name``'s (or the workload given beside it) at the run's
``max_target_length``.

A workload file fixes its sequence. A model of MaxText's library whose shipped workload runs
another length (MaxText's library ships each at its model file's length, base.yml's 2,048 where
the file sets none; the tiering recipes run Llama 3.1 at 8,192) is rebuilt from its model file at
the run's length: the point's workload becomes ``NAME@TOKENS`` (e.g. ``llama3.1-8b@8192``), a name
every command and experiment reads again to the same model
(:func:`~wus_sim.model.importers.maxtext_model.library_workload`). Any other workload at another
length is refused in one line naming the remedy.
"""

from ...inputs.errors import ConfigError, UnknownNameError

__all__ = ["run_workload"]


def run_workload(t):
    """The workload of the translation *t* (:class:`~.maxtext._Translation`): model_name's, or the one
    given beside it, at the run's max_target_length; sets the point's ``workload``."""
    from ...model.importers.maxtext_model import resolve_workload as load_workload, split_length

    name = t.inp.value("model_name")
    mine = t.explicit.get("workload")
    if mine is not None and not t.inp.given("model_name"):
        name, how = mine[0], mine[1]
    else:
        how = "model_name"
    try:
        workload = load_workload(name)
    except UnknownNameError as exc:
        what = "base.yml's default model, no workload: give model_name=NAME or WORKLOAD" if name == "default" \
            else "names no workload"
        raise ConfigError(f"{what}{exc.hint()}", key_path=how, value=name) from None
    if mine is not None and t.inp.given("model_name") and \
            split_length(load_workload(mine[0]).name)[0] != split_length(workload.name)[0]:
        raise ConfigError(f"contradicts model_name={name} of the MaxText run (give one of them)", key_path=mine[1],
                          show_value=False)
    t.run.point["workload"] = name if mine is None or t.inp.given("model_name") else mine[0]
    t.run.sources["workload"] = f"model_name={name}" if how == "model_name" else how
    if workload.flops_unit != "token" or workload.example_unit != "sequence":
        raise ConfigError("is not a language model (MaxText trains token sequences)", key_path=how, value=name)
    sequence = t.inp.value("max_target_length")
    t.used.update(("model_name", "max_target_length"))
    if sequence != workload.units_per_example and (t.inp.given("max_target_length") or how == "model_name"):
        rebuilt = _rebuilt(t, t.run.point["workload"], sequence)
        if rebuilt is not None:
            return rebuilt
        raise ConfigError(f"is not the {workload.units_per_example:,} tokens of workload {workload.name}'s sequences"
                          f"{t.default_note('max_target_length')}: a workload file fixes its sequence; give "
                          f"max_target_length={workload.units_per_example}, or a workload at {sequence} tokens "
                          f"(wus-sim import-workload CONFIG --sequence-length {sequence})",
                          key_path="max_target_length", value=sequence)
    return workload


def _rebuilt(t, name, sequence):
    """MaxText's library model *name* rebuilt at *sequence* tokens (the point's workload becomes
    ``NAME@TOKENS``), or None when *name* is not a library model (a workload file fixes its length)."""
    from ...model.importers.maxtext_model import library_models, library_workload, split_length

    base = split_length(name)[0]
    if base not in library_models():
        return None
    if isinstance(sequence, bool) or not isinstance(sequence, int) or not 1 <= sequence <= 2**24:
        raise ConfigError("must be a whole number in [1, 16777216]", key_path="max_target_length", value=sequence)
    workload = library_workload(base, sequence)
    shipped = t.run.point["workload"]
    t.run.point["workload"] = workload.name
    t.run.sources["workload"] += f" max_target_length={sequence}"
    t.run.notes.append(f"workload {workload.name}: MaxText's {base} rebuilt from its model file at max_target_length="
                       f"{sequence}{t.default_note('max_target_length')} (workload {shipped} runs another length)")
    return workload
