"""One way out for every single-file output: write beside, flush, fsync, rename.

Every file the program writes whole (a calibration, an imported workload, a trace, the
validation table and plot, results tables, run plots, reports) goes through
:func:`write_atomic`, so one set of rules holds for all of them:

* the target is looked at first (:func:`wus_sim.inputs.files.check_writable_file`): a folder,
  a FIFO, a device, a socket, a missing or read-only folder is refused by name, never opened
  (opening a FIFO for writing waits for a reader forever; ``/dev/full`` fails every write);
* the bytes go to a temporary file in the target's own folder (``.NAME.XXXXXX.tmp``: the same
  file system, so the rename is atomic), which is flushed and ``fsync``-ed, then renamed over
  the target: a reader sees the old file or the new one, never half of one;
* when anything fails part-way (a full disk, a file-size limit, an interrupt) the temporary is
  removed and the previous file is left as it was; an OS error is one
  :class:`~wus_sim.inputs.errors.ConfigError` naming the file and the option that named it.

A process killed outright (SIGKILL, or SIGXFSZ at a file-size limit) cannot remove its
temporary; the previous file is still intact, and the hidden ``.tmp`` is all that is left.
"""

import errno
import os
from pathlib import Path
import tempfile

from .errors import ConfigError

__all__ = ["write_atomic", "write_rule", "WriteError"]


class WriteError(ConfigError):
    """An OS error while writing an output (after the checks before any work passed): a caller
    that has more to say (a run's resume hint) catches this one."""


def write_rule(exc):
    """The rule an OSError raised while writing breaks, in one phrase."""
    code = getattr(exc, "errno", None)
    return {
        errno.ENOSPC: "cannot be written: no space left on the device",
        errno.EFBIG: "cannot be written: the file would exceed the file-size limit",
        errno.EDQUOT: "cannot be written: disk quota exceeded",
        errno.EROFS: "cannot be written: the file system is read-only",
        errno.EACCES: "cannot be written: no permission",
        errno.EPERM: "cannot be written: not permitted",
        errno.ENAMETOOLONG: "cannot be written: the name is too long for the OS",
        errno.ELOOP: "cannot be written: a loop of symbolic links",
        errno.ENOENT: "cannot be written: its folder does not exist",
        errno.ENOTDIR: "cannot be written: a part of its path is not a folder",
        errno.EISDIR: "cannot be written: it is a folder",
        errno.EIO: "cannot be written: an I/O error",
    }.get(code, f"cannot be written: {getattr(exc, 'strerror', None) or type(exc).__name__}")


def write_atomic(path, data, *, what="file", named_by=None, encoding="utf-8"):
    """Write *data* to *path* atomically (see the module docstring); return *path* as a Path.

    *data* is ``bytes``, ``str`` (encoded with *encoding*) or a callable ``write(f)`` given the
    temporary file opened in binary mode (for writers that want a file: ``savefig``,
    ``to_parquet``). Raises ConfigError naming *path* (and *named_by*, the option) on any OS
    error, with the previous file intact and no temporary left behind."""
    from .files import check_writable_file

    if isinstance(path, str) and not path:
        raise ConfigError("is not a file name (it is empty)", key_path=named_by, value="")
    path = Path(path)
    try:
        check_writable_file(path, what=what, named_by=named_by)
    except ConfigError as exc:  # at write time, so a WriteError (the folder went away mid-run)
        raise WriteError(exc.rule, file=exc.file, key_path=exc.key_path) from None
    if isinstance(data, str):
        try:
            data = data.encode(encoding)
        except UnicodeEncodeError:
            data = data.encode("utf-8")  # a name the locale cannot spell: UTF-8 rather than a crash
    mode = _mode_for(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=f".{path.name[:100]}.", suffix=".tmp")
    except OSError as exc:  # the folder is there (checked above) but takes no new file: /proc, a read-only mount
        raise WriteError(f"cannot be written: no file can be created in its folder "
                         f"({exc.strerror or type(exc).__name__})", file=path, key_path=named_by) from None
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise WriteError(write_rule(exc), file=path, key_path=named_by) from None
    finally:
        if tmp is not None:  # failed (or interrupted) part-way: drop the half-written temporary
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return path


def _mode_for(path):
    """The permission bits the file gets: the old file's, else what ``open`` would give (0666
    less the umask); ``mkstemp`` alone would make every output private (0600)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except (OSError, ValueError):
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
