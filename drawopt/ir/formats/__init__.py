"""Reading and writing streams: ``.dstream`` text, JSON and ``.npz``.

>>> from drawopt.ir.formats import loads, dumps
>>> s = loads("drawopt 1\\nDispatch 1 1 1\\n")
>>> dumps(s).splitlines()[-1]
'Dispatch 1 1 1'

All three formats round-trip losslessly (``loads(dumps(s, f), f) == s``). Every
loader ends with :meth:`Stream.check` and reports any bad input as
:class:`~drawopt.errors.InputError` (``file:line:col: error: message``):

* text: the line and the column of the offending token;
* JSON: the position of the offending command / declaration element (or of the
  argument inside it), syntax errors where :mod:`json` finds them;
* npz: line = index of the offending command + 1, column 1 (1:1 for archive-level
  problems).

Writes are atomic (:func:`drawopt.ir.formats.atomic.write_atomic`).
"""

from __future__ import annotations

__all__ = [
    "load", "save", "loads", "dumps", "format_for", "sniff", "write_atomic", "write_text_atomic",
    "FORMATS", "EXTENSIONS",
]

import os
import sys

from drawopt.errors import InputError, UsageError
from drawopt.ir.formats.atomic import write_atomic
from drawopt.ir.formats.common import BAD_INPUT, FORMATS
from drawopt.ir.stream import Stream

EXTENSIONS = {".dstream": "text", ".txt": "text", ".json": "json", ".npz": "npz"}
"""File extension -> format."""

_ALIASES = {"text": "text", "dstream": "text", "txt": "text", "json": "json", "npz": "npz"}


def _fmt(fmt: str) -> str:
    try:
        return _ALIASES[fmt]
    except (KeyError, TypeError):
        raise UsageError(f"unknown stream format {fmt!r} (use text, json or npz)") from None


def format_for(path: str | os.PathLike[str]) -> str:
    """The format of ``path`` from its extension: ``'text'``, ``'json'`` or ``'npz'``.

    Raises
    ------
    UsageError
        If the extension is not one of ``.dstream``, ``.txt``, ``.json``, ``.npz``.
    """
    p = os.fspath(path)
    ext = os.path.splitext(p)[1].lower()
    try:
        return EXTENSIONS[ext]
    except KeyError:
        raise UsageError(f"cannot tell the format of '{p}' from its extension "
                         f"(use {', '.join(EXTENSIONS)}, or say --from/--to text|json|npz)") from None


def sniff(data: bytes | str) -> str:
    """Guess the format of file contents: ``PK`` -> npz, ``{`` -> json, else text."""
    if isinstance(data, str):
        head = data.lstrip("\ufeff \t\r\n")[:1]
        return "json" if head == "{" else "text"
    if data.startswith(b"PK"):
        return "npz"
    head = data.lstrip(b" \t\r\n")
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:].lstrip(b" \t\r\n")
    return "json" if head[:1] == b"{" else "text"


def _decode(data: bytes | str, file: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise InputError(f"not UTF-8 text: {e.reason} (byte 0x{data[e.start]:02x})", file, line, col) from None


def loads(data: str | bytes, fmt: str = "text", file: str = "<string>") -> Stream:
    """Parse a stream from ``data`` in format ``fmt`` (``'text'``, ``'json'`` or ``'npz'``).

    Parameters
    ----------
    data
        The file contents (``bytes`` for npz; text formats take ``str`` or UTF-8 ``bytes``).
    fmt
        The format.
    file
        Name used in error messages.

    Returns
    -------
    Stream
        A checked stream; ``stream.line`` holds each command's source line.

    Raises
    ------
    InputError
        For any bad input, located as described in the module docstring.

    >>> from drawopt.gen import generate
    >>> loads(dumps(generate("quads", 2))) == generate("quads", 2)
    True
    """
    fmt = _fmt(fmt)
    try:
        if fmt == "npz":
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise UsageError("npz data must be bytes")
            from drawopt.ir.formats.npz import loads_npz
            return loads_npz(bytes(data), file)
        text = _decode(data, file)
        if fmt == "json":
            from drawopt.ir.formats.jsonfmt import loads_json
            return loads_json(text, file)
        from drawopt.ir.formats.text import loads_text
        return loads_text(text, file)
    except (InputError, UsageError):
        raise
    except BAD_INPUT as e:  # last line of defence: never let a hostile input escape as another type
        raise InputError(f"unreadable {fmt} stream: {type(e).__name__}: {e}", file, 1, 1) from None


def dumps(stream: Stream, fmt: str = "text") -> str | bytes:
    """The stream in format ``fmt``: ``str`` for text and JSON, ``bytes`` for npz.

    >>> from drawopt.gen import generate
    >>> dumps(generate("quads", 2)).splitlines()[0]
    'drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=on'
    """
    fmt = _fmt(fmt)
    if fmt == "npz":
        from drawopt.ir.formats.npz import dumps_npz
        return dumps_npz(stream)
    if fmt == "json":
        from drawopt.ir.formats.jsonfmt import dumps_json
        return dumps_json(stream)
    from drawopt.ir.formats.text import dumps_text
    return dumps_text(stream)


def load(path: str | os.PathLike[str], fmt: str | None = None) -> Stream:
    """Read a stream file; ``'-'`` reads standard input.

    The format is ``fmt`` if given, else the extension of ``path``
    (:func:`format_for`), else -- for standard input -- sniffed (:func:`sniff`).

    >>> import os, tempfile
    >>> from drawopt.gen import generate
    >>> path = os.path.join(tempfile.mkdtemp(), "q.npz")
    >>> save(generate("quads", 8), path)
    >>> load(path) == generate("quads", 8)
    True
    """
    p = os.fspath(path)
    if p == "-":
        name = "<stdin>"
        buf = getattr(sys.stdin, "buffer", None)
        data: bytes | str = buf.read() if buf is not None else sys.stdin.read()
    else:
        name = p
        fmt = _fmt(fmt) if fmt is not None else format_for(p)
        try:
            with open(p, "rb") as f:
                data = f.read()
        except OSError as e:
            raise InputError(f"cannot read file: {e.strerror or e}", p, 1, 1) from None
    if fmt is None:
        fmt = sniff(data)
    if fmt == "npz" and isinstance(data, str):
        raise InputError("npz needs binary input", name, 1, 1)
    return loads(data, fmt, name)


def save(stream: Stream, path: str | os.PathLike[str], fmt: str | None = None) -> None:
    """Write ``stream`` to ``path`` atomically; ``'-'`` writes standard output.

    The format is ``fmt`` if given, else the extension of ``path`` (text for
    ``'-'``). Nothing is written if encoding fails; a failed write leaves no file.

    >>> import os, tempfile
    >>> from drawopt.gen import generate
    >>> path = os.path.join(tempfile.mkdtemp(), "q.dstream")
    >>> save(generate("quads", 2), path)
    >>> open(path).readline().split()[:2]
    ['drawopt', '1']
    """
    p = os.fspath(path)
    fmt = _fmt(fmt) if fmt is not None else ("text" if p == "-" else format_for(p))
    out = dumps(stream, fmt)
    data = out.encode("utf-8") if isinstance(out, str) else out
    if p == "-":
        buf = getattr(sys.stdout, "buffer", None)
        if buf is not None:
            sys.stdout.flush()
            buf.write(data)
            buf.flush()
        elif isinstance(out, str):
            sys.stdout.write(out)
            sys.stdout.flush()
        else:
            raise UsageError("cannot write binary npz to this standard output")
        return
    write_atomic(p, data)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (reports, side files); ``'-'`` = stdout."""
    if os.fspath(path) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_atomic(path, text.encode("utf-8"))
