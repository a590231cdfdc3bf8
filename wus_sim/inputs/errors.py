"""Exception types for user-facing errors.

User mistakes (bad YAML, unknown names, sizes that do not parse) raise a
:class:`WusError` subclass; the CLI prints its message on one line and exits
non-zero, with no traceback. ``assert`` is kept for programming errors only.
"""

__all__ = ["WusError", "ConfigError", "UnknownNameError", "InfeasibleError", "did_you_mean", "listed", "SEARCH_PATHS"]


class WusError(Exception):
    """Base class of every error that is the user's to fix."""


class ConfigError(WusError):
    """A value in an input file or option breaks a rule.

    The message names the file, the key path, the value and the rule, e.g.
    ``experiments/x.yaml: sweep.link_GBps[2]: -5 must be > 0``.
    """

    def __init__(self, rule, *, file=None, key_path=None, value=None, show_value=True):
        from .text import excerpt, short_repr

        self.file = None if file is None else str(file)
        self.key_path = key_path
        self.value = value
        self.rule = rule
        self.show_value = show_value
        # Every part is cut to an excerpt: the message stays one bounded line whatever the input
        # (a 200 KB path, a 10 MB name, 10^10 aliased list items).
        # a file name is the user's own (up to 160 characters); a key path may be hostile input
        # (a 10,000-character sweep key, a safetensors tensor name): an excerpt of 60
        where = ": ".join(excerpt(p, limit) for p, limit in ((self.file, 160), (key_path, 60)) if p)
        rule_text = excerpt(rule, 1000)  # a rule may carry the known names (UnknownNameError.hint: 800)
        what = f"{short_repr(value)} {rule_text}" if show_value and value is not None else rule_text
        super().__init__(f"{where}: {what}" if where else what)


    def at(self, key_path):
        """The same error, reported at *key_path* instead (e.g. an API argument's error
        re-raised by the command line under the option's name)."""
        return ConfigError(self.rule, file=self.file, key_path=key_path, value=self.value,
                           show_value=self.show_value)


class UnknownNameError(WusError):
    """A name (topology, workload, optimizer, algorithm) that is not known.

    The message says which known name was probably meant (:func:`did_you_mean`) and, for the
    kinds a user can add, the search-path variable that adds them (:data:`SEARCH_PATHS`)."""

    def __init__(self, kind, name, known):
        self.kind = kind
        self.name = name
        self.known = sorted(known)
        super().__init__(f"unknown {kind} {_short(name)}{self.hint()}")

    def hint(self):
        """``" (did you mean X?); known: ...; your own: ..."``: what follows the name in every
        message about it (re-raisers that name the key instead reuse it)."""
        out = did_you_mean(self.name, self.known)
        out += f"; known: {listed(self.known, 600)}"
        env = SEARCH_PATHS.get(self.kind)
        if env:
            out += f"; your own: a NAME.yaml in a folder on {env}, or a path to one"
        if self.kind == "workload":  # wus_sim.model.importers.maxtext_model.resolve_workload
            out += "; a MaxText library model at another sequence length: NAME@TOKENS (e.g. llama3.1-8b@8192)"
        return out


SEARCH_PATHS = {"topology": "WUS_SIM_TOPOLOGY_PATH", "workload": "WUS_SIM_WORKLOAD_PATH",
                "optimizer": "WUS_SIM_OPTIMIZER_PATH"}
"""The environment variable that adds names of each kind (``os.pathsep``-separated folders)."""


def listed(names, limit, *, cut=800):
    """*names* joined by commas; a list longer than *limit* characters names those sharing the part
    up to their first or their last '-' (whichever gives the shorter line) once, as ``PREFIX-{a,b}``, so
    a long list still names every entry on one bounded line (71 shipped workloads: 957 characters
    plain, 653 grouped at the first '-'; the topologies at the last, ``tpu-v3-{128,2048,...}``); the
    line is cut to *cut* characters beyond that."""
    from .text import excerpt

    names = [str(n) for n in names]
    plain = ", ".join(names)
    if len(plain) <= limit:
        return plain

    def grouped(head_of):
        groups = {}
        for n in names:
            groups.setdefault(head_of(n), []).append(n)
        return ", ".join(ns[0] if len(ns) == 1 else head + "{" + ",".join(n[len(head):] for n in ns) + "}"
                         for head, ns in groups.items())

    return excerpt(min(grouped(lambda n: n[:n.find("-") + 1] if "-" in n else n),
                       grouped(lambda n: n[:n.rfind("-") + 1] if "-" in n else n), key=len), cut)


def did_you_mean(name, known):
    """``' (did you mean X?)'`` (or ``X or Y``) for the known names closest to *name*
    (:func:`difflib.get_close_matches`, its default cutoff 0.6), else ``''``."""
    import difflib

    if not isinstance(name, str) or len(name) > 200:
        return ""
    close = difflib.get_close_matches(name, [str(k) for k in known], n=2)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def _short(value):
    from .text import short_repr

    return short_repr(value)


class InfeasibleError(WusError):
    """A configuration that cannot run, e.g. it does not fit in HBM.

    A sweep records it as a row with ``status='infeasible'`` instead of crashing.
    """

    def __init__(self, message, *, what=None, need=None, have=None):
        self.what = what
        """Name of the resource that is exceeded (e.g. ``'hbm'``)."""
        self.need = need
        """Amount needed, in the resource's unit (bytes for memory)."""
        self.have = have
        """Amount available, same unit."""
        super().__init__(message)
