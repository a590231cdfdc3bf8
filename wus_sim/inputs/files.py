"""One way in for every file the program reads: look, then open without blocking, then read a bounded amount.

Every input file (YAML specs, calibrations, measured tables, run-folder files) is read through
:func:`read_bytes` (or :func:`read_text`), so one set of rules holds for all of them:

* the name is looked at first (``os.stat``): it must be a regular file; a folder, a FIFO, a
  device, a socket, a loop of links or a link to nothing is refused by name, never opened
  (opening a FIFO waits for a writer forever; reading ``/dev/zero`` never ends);
* it is opened with ``O_NONBLOCK`` (a FIFO swapped in between the look and the open cannot block)
  and looked at again through the open descriptor;
* a file larger than the format's limit is refused before it is read, and at most the limit
  plus one byte is ever read (``/proc`` files report size 0);
* every OS error (missing, no permission, name too long, a path part that is not a folder) is one
  :class:`~wus_sim.inputs.errors.ConfigError` naming the file, the option or key that named it
  (``named_by``: ``--measured``, ``base.calibration``) and the rule.

:func:`check_folder` does the same for a folder expected to exist, and :func:`check_writable_file`
for a file about to be written (before any work is done).
"""

import errno
import os
from pathlib import Path
import stat

from .errors import ConfigError
from .limits import MAX_FILE_BYTES

__all__ = ["read_bytes", "read_text", "check_file", "check_folder", "check_writable_file", "check_output_folder",
           "kind_of"]


def kind_of(mode):
    """What a ``st_mode`` is, in words (``'a folder'``, ``'a FIFO (named pipe)'``, ...)."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _os_rule(exc, path):
    """The rule an OSError (or a ValueError for a NUL in the name) breaks, in one phrase."""
    if isinstance(exc, ValueError):
        return "is not a valid file name (it contains a NUL byte)"
    code = getattr(exc, "errno", None)
    if code == errno.ENOENT:
        try:
            os.lstat(path)
        except (OSError, ValueError):
            return "file not found"
        return "is a symbolic link to a file that does not exist"
    return {
        errno.ELOOP: "is a loop of symbolic links",
        errno.ENAMETOOLONG: "cannot be read: the name is too long for the OS",
        errno.EACCES: "cannot be read: no permission",
        errno.EPERM: "cannot be read: not permitted",
        errno.ENOTDIR: "cannot be read: a part of its path is not a folder",
        errno.EISDIR: "is a folder, not a file",
    }.get(code, f"cannot be read: {getattr(exc, 'strerror', None) or type(exc).__name__}")


def _error(rule, path, named_by):
    return ConfigError(rule, file=path, key_path=named_by)


def check_file(path, *, what="file", named_by=None):
    """``os.stat`` of *path*, which must be a regular file (links followed); else a ConfigError."""
    try:
        st = os.stat(path)
    except (OSError, ValueError) as exc:
        raise _error(_os_rule(exc, path), path, named_by) from None
    if not stat.S_ISREG(st.st_mode):
        raise _error(f"is {kind_of(st.st_mode)}, not {_a(what)}", path, named_by)
    return st


def check_folder(path, *, what="folder", named_by=None):
    """``os.stat`` of *path*, which must be a folder (links followed); else a ConfigError."""
    try:
        st = os.stat(path)
    except (OSError, ValueError) as exc:
        raise _error(_os_rule(exc, path), path, named_by) from None
    if not stat.S_ISDIR(st.st_mode):
        raise _error(f"is {kind_of(st.st_mode)}, not {_a(what)}", path, named_by)
    return st


def check_writable_file(path, *, what="file", named_by=None):
    """Refuse, before any work, a file that cannot be written: its name is a folder, a FIFO or a
    device, its folder is missing or not a folder, or neither it nor its folder may be written."""
    if isinstance(path, str) and not path:
        raise ConfigError("is not a file name (it is empty)", key_path=named_by, value="")
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except (OSError, ValueError) as exc:
        raise _error(_os_rule(exc, path).replace("cannot be read", "cannot be written"), path, named_by) from None
    if st is not None:
        if not stat.S_ISREG(st.st_mode):
            raise _error(f"is {kind_of(st.st_mode)}; give {named_by or 'it'} the {what} to write", path, named_by)
        if not os.access(path, os.W_OK):
            raise _error("cannot be written (no permission)", path, named_by)
        _probe(path.parent, path, named_by)  # the new file is written beside it, then renamed over it
        return
    parent = path.parent
    try:
        pst = os.stat(parent)
    except (OSError, ValueError):
        raise _error("cannot be written: its folder does not exist", path, named_by) from None
    if not stat.S_ISDIR(pst.st_mode):
        raise _error(f"cannot be written: {parent} is {kind_of(pst.st_mode)}, not a folder", path, named_by)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise _error("cannot be written: no permission to create files in its folder", path, named_by)
    _probe(parent, path, named_by)


def _probe(folder, path, named_by):
    """Create and remove a file in *folder*: the one test that a folder takes new files (as root,
    ``os.access`` says yes to /proc and to a read-only mount)."""
    import tempfile

    try:
        fd, name = tempfile.mkstemp(dir=str(folder), prefix=".wus-sim-probe.", suffix=".tmp")
    except (OSError, ValueError) as exc:
        raise _error(f"cannot be written: no file can be created in {'it' if folder == path else 'its folder'} "
                     f"({getattr(exc, 'strerror', None) or type(exc).__name__})", path, named_by) from None
    os.close(fd)
    try:
        os.unlink(name)
    except OSError:
        pass


def check_output_folder(path, *, named_by=None):
    """Refuse, before any work, a folder of outputs that cannot be made or written: the name is a
    file or a device, or the nearest part of it that exists is not a writable folder."""
    if isinstance(path, str) and not path:
        raise ConfigError("is not a folder name (it is empty)", key_path=named_by, value="")
    path = Path(path)
    probe = path
    while True:
        try:
            st = os.stat(probe)
            break
        except FileNotFoundError:
            if probe.parent == probe:
                raise _error("cannot be created: no part of its path exists", path, named_by) from None
            probe = probe.parent
        except (OSError, ValueError) as exc:
            raise _error(_os_rule(exc, probe).replace("cannot be read", "cannot be created"), path,
                         named_by) from None
    if not stat.S_ISDIR(st.st_mode):
        where = "" if probe == path else f": {probe} is {kind_of(st.st_mode)}"
        raise _error(f"is {kind_of(st.st_mode)}, not a folder" if probe == path else f"cannot be created{where}",
                     path, named_by)
    if not os.access(probe, os.W_OK | os.X_OK):
        raise _error("cannot be written: no permission" if probe == path else
                     f"cannot be created: no permission to write in {probe}", path, named_by)
    _probe(probe, path, named_by)


def read_bytes(path, *, what="file", named_by=None, limit=MAX_FILE_BYTES):
    """At most *limit* bytes of the regular file *path*; anything else is a one-line ConfigError."""
    check_file(path, what=what, named_by=named_by)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError) as exc:
        raise _error(_os_rule(exc, path), path, named_by) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped between the look and the open
            raise _error(f"is {kind_of(st.st_mode)}, not {_a(what)}", path, named_by)
        if st.st_size > limit:
            raise _error(f"is larger than the limit of {_size(limit)} for {_a(what)}", path, named_by)
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise _error(_os_rule(exc, path), path, named_by) from None
    finally:
        os.close(fd)
    if total > limit:
        raise _error(f"is larger than the limit of {_size(limit)} for {_a(what)}", path, named_by)
    return b"".join(chunks)


def read_text(path, *, what="file", named_by=None, limit=MAX_FILE_BYTES):
    """The UTF-8 text of *path* (a leading BOM dropped), read by :func:`read_bytes`; a file that
    is not text is named, never quoted."""
    data = read_bytes(path, what=what, named_by=named_by, limit=limit)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _error(f"is not {_a(what)} (not UTF-8 text: byte 0x{data[exc.start]:02x} at offset "
                     f"{exc.start}); save it as UTF-8", path, named_by) from None
    if "\x00" in text:
        raise _error(f"is not {_a(what)} (it contains NUL bytes: a binary file?)", path, named_by)
    return text.lstrip("\ufeff")


def _a(what):
    return f"an {what}" if what[:1] in "aeiou" else f"a {what}"


def _size(n):
    return f"{n // 2**20} MiB" if n >= 2**20 and n % 2**20 == 0 else f"{n:,} bytes"
