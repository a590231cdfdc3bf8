"""Point parameters: the one table of every parameter a simulated point takes, and its checks.

:mod:`.params` (:data:`~.params.POINT_KEYS`: type, default, unit and rule of each),
:mod:`.param_checks` (the check every value goes through, wherever it comes from) and
:mod:`.param_names` (the parameters that name an input file or shipped entry).

May import: the layers below training only; every other room of training may import it.
"""
