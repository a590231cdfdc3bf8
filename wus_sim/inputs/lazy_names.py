"""Package names that load their module on first use (PEP 562): importing a package then does no
work, so a short command that needs one light module of it does not pay for the rest (numpy,
pandas, SimPy)."""

from importlib import import_module

__all__ = ["lazy_names"]


def lazy_names(package, table, namespace, wrap=None):
    """The module-level ``__getattr__`` and ``__dir__`` of *package* (its ``__name__``) whose
    names *table* maps to their submodule (relative to the package, e.g. ``"api"`` or
    ``"hardware.topology"``; ``"module:attribute"`` where the module's name for it differs); *namespace* is the package's ``globals()``, where a loaded name
    is kept so that it is looked up once. *wrap* ``(name, value) -> value`` is what the package
    exports instead of the module's value (``wus_sim`` puts its functions behind their doors)."""

    def __getattr__(name):
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = module.partition(":")
        value = getattr(import_module(f".{module}", package), attribute or name)
        if wrap is not None:
            value = wrap(name, value)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__
