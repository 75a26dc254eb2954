"""Error types carrying a source location (``file:line:col: error: message``)."""

from __future__ import annotations

__all__ = ["DrawoptError", "InputError", "UsageError", "SourceLocation"]

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLocation:
    """A position in an input file; ``line`` and ``col`` are 1-based."""

    file: str = "<stream>"
    line: int = 1
    col: int = 1

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class DrawoptError(Exception):
    """Base class of every error drawopt reports to a user."""


class InputError(DrawoptError):
    """Bad input: a malformed, inconsistent or hostile stream file.

    ``str(err)`` is the conventional compiler diagnostic
    ``file:line:col: error: message``; the CLI prints it and exits with status 2.
    """

    def __init__(self, message: str, file: str = "<stream>", line: int = 1, col: int = 1):
        self.message = message
        self.loc = SourceLocation(file, max(int(line), 1), max(int(col), 1))
        super().__init__(f"{self.loc}: error: {message}")

    def with_file(self, file: str) -> InputError:
        """Return the same error attributed to ``file``."""
        return InputError(self.message, file, self.loc.line, self.loc.col)


class UsageError(DrawoptError):
    """Wrong command-line or API usage (exit status 2)."""
