"""Type stub of the compiled text reader and text/JSON printer kernels (``cext/_text.pyx``; pure
twins: ``drawopt.ir.formats.text._PureScanner``, the JSON reader's Plan loop and ``_scan_array``,
the Python printers of ``text.py`` and ``jsonfmt.py``, ``text._data_lines_py``)."""

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["text_scanner", "command_printer", "format_words", "scan_json_array"]

class _TextScanner:
    """Reads the common lines of a ``.dstream`` text into command columns; hands every other
    line to the Python reader (``drawopt.ir.formats.text._PureScanner``)."""

    ready: bool

    def scan(self) -> tuple[int, str] | None:
        """The next line the Python reader must handle, ``(lineno, text)``; None at the end."""
        ...
    def declared(self, name: bytes, index: int, kind_bit: int, size: int) -> None: ...
    def add(self, code: int, row: list[int], var: list[int], flags: int, lineno: int) -> None: ...
    def data_have(self, di: int) -> int: ...
    def data_add(self, di: int, words: list[int]) -> None: ...
    def encode_json(self, raw: list[Any], start: int) -> int:
        """Encode JSON command arrays from ``start`` up to the first one Python must handle."""
        ...
    def finish(self) -> tuple[Any, ...]:
        """``(op, args, var_off, var_len, pool, flags, line, data)``."""
        ...

class _CommandPrinter:
    """Prints the common commands as ``.dstream`` lines or JSON command arrays; stops at the
    others (the Python printers print those)."""

    def format(self, op: npt.ArrayLike, args: npt.ArrayLike, var_off: npt.ArrayLike, var_len: npt.ArrayLike,
               pool: npt.ArrayLike, flags: npt.ArrayLike, start: int) -> tuple[str, int]:
        """``(text, stop)``: the lines of commands ``start..stop-1``."""
        ...

def text_scanner(data: bytes, ops: list[tuple[Any, ...]], flags: list[tuple[bytes, int]], buffer_bit: int,
                 capacity: int = -1) -> _TextScanner:
    """A reader of ``data`` (UTF-8 ``.dstream`` text) into command columns."""
    ...

def command_printer(ops: list[Any], names: list[bytes], heap_names: list[bytes], bools: tuple[bytes, bytes],
                    flags: list[tuple[int, bytes]], f32: Callable[[int], str], json: bool, heap_quote: bytes,
                    prefix: bytes, suffix: bytes, last_suffix: bytes) -> _CommandPrinter:
    """A printer of command lines (text or JSON)."""
    ...

def scan_json_array(text: str, idx: int, scan: Callable[[str, int], tuple[Any, int]]
                    ) -> tuple[list[Any], list[int], int] | None:
    """``(items, offsets, end)`` of the JSON array at ``text[idx]`` (``jsonfmt._scan_array``)."""
    ...

def format_words(prefix: bytes, words: npt.NDArray[np.uint32] | npt.ArrayLike, per_line: int) -> str:
    """``data`` lines of ``words``, each ended by a newline (``text._data_lines_py``)."""
    ...
