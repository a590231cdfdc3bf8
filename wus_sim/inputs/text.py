"""Bounded excerpts of user input for error messages (no imports: the error types use them)."""


__all__ = ["EXCERPT_CHARS", "excerpt", "short_repr"]


EXCERPT_CHARS = 60
"""Longest excerpt of a user value echoed in an error message."""


def short_repr(value, limit=EXCERPT_CHARS):
    """``repr(value)`` cut to *limit* characters; safe for huge ints and deep or huge containers.

    Booleans and None are written as YAML and JSON write them (``true``, ``false``, ``null``),
    also inside containers: the values quoted come mostly from YAML files and JSON options.
    """
    if isinstance(value, bool) or value is None:
        return _YAML_WORDS[value]
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"{'-' if value < 0 else ''}about 10^{int(value.bit_length() * 0.30103)}"
    if isinstance(value, str) and len(value) > limit:
        # Cut before repr: a 10 MB name must not be copied whole to be shortened.
        return repr(value[:limit])[:limit] + f"... ({len(value):,} chars)"
    if isinstance(value, (list, tuple, dict, set)):
        try:
            text = reprlib_repr(value)
        except (RecursionError, ValueError):
            text = f"<{type(value).__name__} of {len(value)}>"
        return excerpt(text, limit)
    try:
        return excerpt(repr(value), limit)
    except (RecursionError, ValueError):
        return f"<{type(value).__name__}>"


_YAML_WORDS = {True: "true", False: "false", None: "null"}


def reprlib_repr(value):
    """A bounded repr of a container (reprlib cuts long lists, deep nesting and long strings),
    booleans and None written as YAML writes them."""
    import reprlib

    class _Repr(reprlib.Repr):
        def repr_bool(self, x, level):
            return _YAML_WORDS[x]

        def repr_NoneType(self, x, level):
            return _YAML_WORDS[x]

    r = _Repr()
    r.maxlevel, r.maxlist, r.maxdict, r.maxstring, r.maxother = 3, 6, 6, 40, 40
    return r.repr(value)


def excerpt(text, limit=EXCERPT_CHARS):
    """*text* on one line, cut to *limit* characters (with '...' and the full length when cut)."""
    text = str(text).replace("\r", "\\r").replace("\n", "\\n")
    if len(text) <= limit:
        return text
    return f"{text[:limit - 3]}... ({len(text):,} chars)"
