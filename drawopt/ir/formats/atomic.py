"""Atomic file output: a temporary file in the target's directory, then ``os.replace``.

Readers of the target see the old file or the complete new one, never a partial
write; on any failure the temporary file is removed and the target is untouched.
"""

from __future__ import annotations

__all__ = ["write_atomic"]

import os
import tempfile

from drawopt.errors import UsageError


def _default_mode() -> int:
    """``0o666 & ~umask`` (what ``open(path, "w")`` would create)."""
    try:  # Linux: read the umask without changing it
        with open("/proc/self/status") as f:
            umask = next(int(ln.split()[1], 8) for ln in f if ln.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        umask = os.umask(0o022)
        os.umask(umask)
    return 0o666 & ~umask


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically.

    The new file gets the mode of the file it replaces, or ``0o666 & ~umask``.
    Raises :class:`~drawopt.errors.UsageError` if the file cannot be written.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = os.stat(path).st_mode & 0o7777
    except OSError:
        mode = _default_mode()
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise UsageError(f"cannot write '{path}': {e.strerror or e}") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
