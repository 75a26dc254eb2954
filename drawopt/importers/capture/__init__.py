"""GFXReconstruct captures (Vulkan; D3D12 through vkd3d; GL through zink) as drawopt streams.

>>> from drawopt.importers.capture import import_capture, list_frames     # doctest: +SKIP
>>> frames = import_capture("tests/data/captures/vkcube/vkcube.jsonl.gz",
...                         shaders="tests/data/captures/vkcube/shaders")  # doctest: +SKIP
>>> sorted(frames), [f.draws for f in list_frames("tests/data/captures/vkcube/vkcube.jsonl.gz")]  # doctest: +SKIP
([1, 2], [1, 1])

The mapping of each Vulkan call onto the stream model, and what is lost, is in docs/import.md.
"""

from __future__ import annotations

__all__ = ["import_capture", "import_capture_summary", "list_frames", "FrameInfo", "Summary", "parse_frames"]

from typing import Any

from drawopt.errors import InputError, UsageError
from drawopt.importers.capture.reader import FrameInfo, Summary, read_capture
from drawopt.ir.stream import Stream


def parse_frames(spec: str | int | tuple[int, int] | None) -> tuple[str, Any]:
    """A frame selection: ``None``/``"all"`` -> every frame, ``N``, ``"A:B"`` (inclusive) or ``(A, B)``.

    >>> parse_frames("2:4"), parse_frames(3), parse_frames("all")
    (('range', (2, 4)), ('one', 3), ('all', None))
    """
    if spec is None or spec == "all":
        return "all", None
    if isinstance(spec, int):
        return "one", spec
    if isinstance(spec, tuple):
        return "range", (int(spec[0]), int(spec[1]))
    text = str(spec).strip()
    try:
        if ":" in text:
            a, b = text.split(":", 1)
            lo, hi = int(a), int(b)
            if lo > hi:
                raise ValueError
            return "range", (lo, hi)
        return "one", int(text)
    except ValueError:
        raise UsageError(f"bad frame selection '{spec}' (use N, A:B or all)") from None


def import_capture_summary(path: str, frames: str | int | tuple[int, int] | None = None, *,
                           shaders: str | None = None, split: str = "auto",
                           name: str | None = None) -> tuple[dict[int, Stream], Summary]:
    """Import the selected frames of capture ``path`` and say what the import did.

    Raises InputError (``file:line:col: error: ...``) for a corrupt or truncated capture, an
    unknown JSON version, or a frame number that the capture does not have."""
    kind, sel = parse_frames(frames)
    if kind == "one":
        keep = lambda n: n == sel  # noqa: E731
    elif kind == "range":
        keep = lambda n: sel[0] <= n <= sel[1]  # noqa: E731
    else:
        keep = lambda n: True  # noqa: E731
    out, summary = read_capture(path, keep, split=split, shaders=shaders, name=name)
    total = summary.frames_total
    wanted = [sel] if kind == "one" else (list(range(sel[0], sel[1] + 1)) if kind == "range" else [])
    missing = [n for n in wanted if n not in out]
    if missing or (kind == "all" and total == 0):
        have = f"frames 1..{total}" if total else "no frames"
        raise InputError(f"frame {missing[0] if missing else 1} is out of range (the capture has {have}, "
                         f"split at each {'vkQueuePresentKHR' if summary.split == 'present' else 'vkQueueSubmit'})",
                         name or path, max(summary.records + 1, 1), 1)
    return out, summary


def import_capture(path: str, frames: str | int | tuple[int, int] | None = None, **options: Any) -> dict[int, Stream]:
    """The streams of the selected frames of capture ``path`` (frame number, from 1 -> stream).

    Options: ``shaders=DIR`` (the ``gfxrecon-extract`` folder; a ``.gfxr`` input is extracted
    itself), ``split="auto"|"present"|"submit"``."""
    return import_capture_summary(path, frames, **options)[0]


def list_frames(path: str, *, split: str = "auto", shaders: str | None = None) -> list[FrameInfo]:
    """Every frame of capture ``path`` with its draw, command and call counts."""
    _, summary = read_capture(path, None, build=False, split=split, shaders=shaders)
    return [FrameInfo(f.frame, f.draws, f.commands, f.calls, f.submits, sum(f.opaque.values()),
                      (f.first_line, f.last_line)) for f in summary.frames]
