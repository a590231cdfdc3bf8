"""The door of the public API: each argument checked by a declared rule before the body runs.

A public function declares its arguments once, ``checked(fn, path=path(), out=out_file(...))``
(or ``@checked(...)`` on a definition), and the door binds a call to the signature, runs each
argument it was given through its rule and calls the function with what the rules return. A
call the signature cannot take (a missing argument, an unknown keyword) and an argument that
breaks its rule are one :class:`~wus_sim.inputs.errors.ConfigError` naming the argument, its
value (a 60-character excerpt) and the rule, before any work: never a TypeError or an
AttributeError from inside, never a value taken silently. The rules are those of
:mod:`wus_sim.inputs.api_args`, where the command line's and the files' rules are written:

* a bool is not a whole number, a number or a name; text is not a bool; bytes are not names
  or paths (``b'quickstart'``);
* numpy scalars follow their value (``np.uint8(25)`` is the int 25, ``np.float64`` a float);
* a callback is callable; an output file is looked at by the atomic writer's checks
  (:func:`~wus_sim.inputs.files.check_writable_file`: ``/dev/full``, a folder, a FIFO, a missing
  folder) and must end in a suffix the writer writes.

Why our own decorator and not pydantic's ``validate_call``: pydantic is not a dependency, its
coercions are not ours (``'1'`` becomes 1, ``True`` an int in lax mode), and its errors are
several lines in its own words; the rules here are the command line's, and one page.
"""

import functools
import inspect
import math
import os
from pathlib import Path

from .api_args import check_bool, check_int, check_number, check_path, plain
from .errors import ConfigError, did_you_mean

__all__ = ["checked", "Rule", "whole", "number", "size", "flag", "name", "choice", "names", "path", "out_file",
           "out_folder", "callback", "instance", "duck", "either", "mapping", "items", "pair", "inside",
           "rules_of"]


class Rule:
    """One argument's rule: ``rule(value, arg)`` returns what the function receives, or raises a
    ConfigError naming *arg*. ``wrong`` holds values the rule refuses (the API's tests call
    every public name with each of them); ``text`` is the rule in words (errors, docs)."""

    def __init__(self, check, text, wrong=()):
        self.check, self.text, self.wrong = check, text, tuple(wrong)

    def __call__(self, value, arg):
        return self.check(value, arg)

    def __repr__(self):
        return f"<rule: {self.text}>"


_ANY_WRONG = (object(), b"bytes", 1j)
"""Values no argument of the API takes: a bare object, bytes, a complex number."""


def _nullable(rule_text, nullable):
    return rule_text + (" (or None)" if nullable else "")


def _wrong(nullable, *values):
    return (*_ANY_WRONG, *values, *(() if nullable else (None,)))


def whole(minimum=None, maximum=None, *, nullable=False):
    """A whole number in ``[minimum, maximum]`` (:func:`~.api_args.check_int`); a Python int."""
    return Rule(lambda v, a: check_int(v, a, minimum=minimum, maximum=maximum, nullable=nullable),
                _nullable("a whole number", nullable), _wrong(nullable, True, "1", 1.5, math.inf))


def number(minimum=None, maximum=None, *, positive=False, nullable=False):
    """A finite number in range (:func:`~.api_args.check_number`); a Python float."""
    return Rule(lambda v, a: check_number(v, a, minimum=minimum, maximum=maximum, positive=positive,
                                          nullable=nullable),
                _nullable("a finite number", nullable), _wrong(nullable, True, "1", math.inf, math.nan))


def size(maximum=None):
    """A size in bytes: a number > 0 or text such as ``'64MiB'`` (:func:`~.units.parse_size`'s
    grammar), at most *maximum*; given back as it was (a numpy scalar as its value)."""
    def check(value, arg):
        from .units import parse_size

        value = plain(value)
        if isinstance(value, str):
            parse_size(value, name=arg)
        else:
            check_number(value, arg, positive=True, maximum=maximum)
        return value

    return Rule(check, "a size in bytes (a number > 0, or text such as '64MiB')",
                _wrong(False, True, "abc", "0MiB", -1, math.inf))


def flag(*, nullable=False):
    """True or False (a numpy bool too; never 1, 'yes' or 'true')."""
    return Rule(lambda v, a: check_bool(v, a, nullable=nullable), _nullable("True or False", nullable),
                _wrong(nullable, 1, "yes", "true"))


def name(what="a name", *, nullable=False, empty=False):
    """A ``str``, not empty unless *empty* (a numpy str too); never bytes, a bool or a number."""
    text = _nullable(f"must be {what} (a {'' if empty else 'non-empty '}str)", nullable)

    def check(value, arg):
        value = plain(value)
        if value is None and nullable:
            return None
        if not isinstance(value, str) or not (value or empty):
            raise ConfigError(text, key_path=arg, value=value)
        return value

    return Rule(check, text, _wrong(nullable, 5, True, *(() if empty else ("",))))


def choice(options, *, nullable=False):
    """One of *options* (names)."""
    options = tuple(options)
    text = _nullable(f"must be one of: {', '.join(map(str, options))}", nullable)

    def check(value, arg):
        value = plain(value)
        if value is None and nullable:
            return None
        if not isinstance(value, str) or value not in options:
            raise ConfigError(text + did_you_mean(value, options), key_path=arg, value=value)
        return value

    return Rule(check, text, _wrong(nullable, 5, True, "", "no-such-name"))


def names(options, what="names", *, one=None):
    """A non-empty list or tuple of *options* (each once), given back as a tuple; *one*: a single
    name (a str among *one*) is taken too, as it is."""
    options = tuple(options)
    text = f"must be a non-empty list of {what} ({', '.join(options)})"

    def check(value, arg):
        if one is not None and isinstance(value, str) and value in one:
            return value
        if not isinstance(value, (list, tuple)) or not value:
            raise ConfigError(text, key_path=arg, value=value)
        out = tuple(plain(v) for v in value)
        for i, v in enumerate(out):
            if not isinstance(v, str) or v not in options:
                raise ConfigError(f"is not one of {what}: {', '.join(options)}{did_you_mean(v, options)}",
                                  key_path=f"{arg}[{i}]", value=v)
        if len(set(out)) < len(out):
            raise ConfigError(text + ", each once", key_path=arg, value=value)
        return out

    return Rule(check, text, (*_ANY_WRONG, None, 5, True, [], (), [5], ["no-such-name"], "no-such-name"))


def path(what="a file name", *, nullable=False):
    """A file name: a non-empty ``str`` or a path-like object (never bytes)."""
    def check(value, arg):
        if value is None and not nullable:  # the message would show no value: say it
            raise ConfigError(f"must be {what} (a str or a pathlib.Path), not None", key_path=arg)
        check_path(value, arg, nullable=nullable)
        return value

    return Rule(check, _nullable(what, nullable), _wrong(nullable, 5, True, ""))


def out_file(suffixes=None, *, what="file", nullable=False):
    """A file to write: a file name ending in one of *suffixes* (any when None) that the atomic
    writer may write (:func:`~wus_sim.inputs.files.check_writable_file`), looked at now, before
    the work whose result it receives."""
    suffixes = tuple(suffixes or ())
    text = _nullable(f"a {what} to write" + (f" ({', '.join(suffixes)})" if suffixes else ""), nullable)

    def check(value, arg):
        from .files import check_writable_file

        if value is None and nullable:
            return None
        check_path(value, arg)
        if suffixes and Path(value).suffix.lower() not in suffixes:
            raise ConfigError(f"must end in {' or '.join(suffixes)} (the {what} is written as "
                              f"{suffixes[0].lstrip('.').upper()})", key_path=arg, value=os.fspath(value))
        check_writable_file(value, what=what, named_by=arg)
        return value

    return Rule(check, text, _wrong(nullable, 5, True, "", "/dev/full"))


def out_folder(*, exists=True):
    """A folder to write files into (:func:`~wus_sim.inputs.files.check_output_folder`); with
    *exists*, it must be there already (the function does not create it)."""
    def check(value, arg):
        from .files import check_folder, check_output_folder

        check_path(value, arg)
        if exists:
            check_folder(value, named_by=arg)
        check_output_folder(value, named_by=arg)
        return value

    return Rule(check, "a folder to write into", _wrong(False, 5, True, "", "/dev/full"))


def callback(*, nullable=True):
    """A callable (a function, a method, an object with ``__call__``)."""
    text = _nullable("must be callable (a function)", nullable)

    def check(value, arg):
        if value is None and nullable:
            return None
        if not callable(value) or isinstance(value, type):
            raise ConfigError(text, key_path=arg, value=value)
        return value

    return Rule(check, text, _wrong(nullable, 5, True, "print"))


def instance(spec, what, *, nullable=False):
    """An instance of the class *spec* names (``'module:Class'``, imported at the first check, so
    that declaring the rule imports nothing); *what* says how to get one."""
    module, _, cls_name = spec.partition(":")
    text = _nullable(f"must be {what}", nullable)

    def check(value, arg):
        from importlib import import_module

        if value is None and nullable:
            return None
        if not isinstance(value, getattr(import_module(module), cls_name)):
            raise ConfigError(text, key_path=arg, value=value)
        return value

    return Rule(check, text, _wrong(nullable, 5, True, "x"))


def duck(attribute, what, *, nullable=False):
    """An object with *attribute* (a class of a package that may not be installed, e.g. a Dask
    ``distributed.Client``: ``submit``), without importing that package."""
    text = _nullable(f"must be {what}", nullable)

    def check(value, arg):
        if value is None and nullable:
            return None
        if isinstance(value, (str, bytes, int, float)) or not callable(getattr(value, attribute, None)):
            raise ConfigError(text, key_path=arg, value=value)
        return value

    return Rule(check, text, _wrong(nullable, 5, True))


def either(what, *rules):
    """The first of *rules* that takes the value; else one error saying *what* the argument must be."""
    wrong = tuple(w for w in _ANY_WRONG)

    def check(value, arg):
        for rule in rules:
            try:
                return rule(value, arg)
            except ConfigError:
                pass
        raise ConfigError(f"must be {what}", key_path=arg, value=value)

    return Rule(check, what, wrong)


def mapping(what="a mapping (a dict)", *, nullable=False):
    """A dict, given back with numpy scalar values as the Python values they hold."""
    text = _nullable(f"must be {what}", nullable)

    def check(value, arg):
        if value is None and nullable:
            return None
        if not isinstance(value, dict):
            raise ConfigError(text, key_path=arg, value=value)
        return {k: plain(v) for k, v in value.items()}

    return Rule(check, text, _wrong(nullable, 5, True, "x", [("a", 1)]))


def items(rule, what, *, nullable=False, empty=False):
    """A list or tuple whose every item obeys *rule*; given back as a tuple."""
    text = _nullable(f"must be a {'' if empty else 'non-empty '}list of {what}", nullable)

    def check(value, arg):
        if value is None and nullable:
            return None
        if type(value).__module__ == "numpy" and getattr(value, "ndim", 0) == 1:
            value = list(value)  # a numpy vector: its items (numpy scalars, which the rule makes plain)
        if not isinstance(value, (list, tuple)) or (not value and not empty):
            raise ConfigError(text, key_path=arg, value=value)
        return tuple(rule(v, f"{arg}[{i}]") for i, v in enumerate(value))

    return Rule(check, text, _wrong(nullable, 5, True, "x", *(() if empty else ([],)),
                                     *([w] for w in rule.wrong[:2])))  # a list holding what its items may not be


def pair(first, second, what):
    """A pair (a list or tuple of two) whose items obey *first* and *second*; given back as a tuple."""
    text = f"must be {what}"

    def check(value, arg):
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise ConfigError(text, key_path=arg, value=value)
        return first(value[0], f"{arg}[0]"), second(value[1], f"{arg}[1]")

    return Rule(check, text, (*_ANY_WRONG, 5, [1], (object(), 1)))


def inside(what):
    """An argument the function's own body checks (by rules shared with the files, e.g. a point
    parameter's): declared so that every argument has its rule written somewhere."""
    return Rule(lambda v, a: v, what, _ANY_WRONG)


def rules_of(fn):
    """``{argument: Rule}`` of a function or class behind a door (``{}`` for one without)."""
    return dict(getattr(fn, "__door__", {}))


def checked(target=None, /, *, closed_keywords=False, **rules):
    """Put *target* (a function, or a class: its ``__init__``) behind a door checking *rules*.

    ``checked(fn, arg=rule, ...)`` returns the checked function; ``@checked(arg=rule, ...)``
    decorates a definition. Every argument named must be one of the signature's, or a keyword
    its ``**kw`` takes; with *closed_keywords*, ``**kw`` takes the declared keywords only (it
    passes them on to a function of known arguments), else any (the body checks them)."""
    if target is None:
        return lambda t: checked(t, closed_keywords=closed_keywords, **rules)
    if isinstance(target, type):
        target.__init__ = checked(target.__init__, closed_keywords=closed_keywords, **rules)
        target.__door__ = rules
        return target
    sig = inspect.signature(target)
    params = sig.parameters
    var_kw = next((p.name for p in params.values() if p.kind is p.VAR_KEYWORD), None)
    named = [p for p in params if params[p].kind not in (params[p].VAR_POSITIONAL, params[p].VAR_KEYWORD)]
    assert var_kw or set(rules) <= set(named), f"rules for no argument of {target.__qualname__}: " \
                                                f"{sorted(set(rules) - set(named))}"
    title = target.__qualname__.replace(".__init__", "")
    known = [p for p in named if p != "self"]

    if var_kw is not None:  # the keywords **kw passes on are the ones declared
        known += [arg for arg in rules if arg not in known]

    # the call is bound by hand (Signature.bind costs ~15 us; a sweep calls some of these per point)
    positional = [p for p in named if params[p].kind in (params[p].POSITIONAL_ONLY, params[p].POSITIONAL_OR_KEYWORD)]
    index = {p: i for i, p in enumerate(positional)}
    var_pos = any(p.kind is p.VAR_POSITIONAL for p in params.values())
    required = [(p, index.get(p)) for p in named if params[p].default is params[p].empty]
    checks = tuple(rules.items())

    def refuse(args, kwargs):
        try:
            sig.bind(*args, **kwargs)
        except TypeError as exc:
            given = set(positional[:len(args)]) | set(kwargs)
            lost = [p for p, _ in required if p not in given]
            if lost:
                raise ConfigError(f"is required: {title}() was called without it", key_path=lost[0]) from None
            raise ConfigError(f"cannot take these arguments ({exc})", key_path=title) from None

    @functools.wraps(target)
    def door(*args, **kwargs):
        for key in kwargs:
            if key not in params or key == var_kw:
                if var_kw is None or (closed_keywords and key not in rules):
                    raise ConfigError(f"is not an argument of {title}{did_you_mean(key, known)}; known: "
                                      f"{', '.join(known)}", key_path=str(key))
        n = len(args)
        if (n > len(positional) and not var_pos) or (kwargs and any(p in kwargs for p in positional[:n])) \
                or any((i is None or i >= n) and p not in kwargs for p, i in required):
            refuse(args, kwargs)
        if checks:
            args = list(args)
            for arg, rule in checks:
                i = index.get(arg)
                if i is not None and i < n:
                    args[i] = rule(args[i], arg)
                elif arg in kwargs:
                    kwargs[arg] = rule(kwargs[arg], arg)
        return target(*args, **kwargs)

    door.__door__ = rules
    return door
