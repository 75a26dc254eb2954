"""Pass manager: pass registry, pipeline strings, cached analyses, --verify-each.

A pass is a small dataclass with a kebab-case ``name``; its options are its
fields, so ``schedule{reorder=opaque}`` sets ``reorder: str = "declared"``.
It declares the analyses it ``requires`` and the ones it ``preserves`` (as in
LLVM's new pass manager); the manager caches analyses and drops those a pass
did not preserve. ``apply`` returns a :class:`PassResult`.
"""

from __future__ import annotations

__all__ = [
    "Pass", "PassResult", "AnalysisManager", "PassManager", "PASSES", "ANALYSES",
    "parse_pipeline", "get_pass", "optimize", "PassError", "DEFAULT_PIPELINE", "default_pipeline",
]

import dataclasses
import importlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from .errors import DrawoptError, UsageError
from .stream import Stream

if TYPE_CHECKING:
    from .result import OptimizeResult

PASSES: dict[str, str] = {
    "dedupe-state": "drawopt.passes.dedupe_state:DedupeStatePass",
    "schedule": "drawopt.passes.schedule:SchedulePass",
    "merge-instances": "drawopt.passes.merge_instances:MergeInstancesPass",
    "pack-x": "drawopt.passes.pack_x:PackXPass",
    "weld": "drawopt.passes.weld:WeldPass",
    "mdi": "drawopt.passes.mdi:MdiPass",
    "flush": "drawopt.passes.flush:FlushPass",
    "gs-plan": "drawopt.passes.gs_plan:GsPlanPass",
}
"""Pass name -> ``module:Class``, imported when first used."""

ANALYSES: dict[str, str] = {
    "state": "drawopt.state:track",
    "graph": "drawopt.graph:build_graph",
}
"""Analysis name -> ``module:function(stream)``."""

DEFAULT_PIPELINE = "dedupe-state"


def default_pipeline(target: str = "d3d12") -> str:
    """The best safe pipeline for ``target`` (see docs/passes.md)."""
    try:
        from .costmodel import default_pipeline as dp
    except ImportError:
        return DEFAULT_PIPELINE
    return dp(target)


class PassError(DrawoptError):
    """A pass failed or produced a stream the verifier rejects."""


@dataclass(frozen=True)
class PassResult:
    """What a pass returns: the stream, whether it changed, what stayed valid, and a report."""

    stream: Stream
    modified: bool
    preserved: frozenset[str] = frozenset()
    report: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def unchanged(cls, stream: Stream, **report: Any) -> PassResult:
        return cls(stream, False, frozenset({"*"}), dict(report))


@dataclass(frozen=True)
class Pass:
    """Base class of passes. Subclasses set ``name`` and implement ``apply``."""

    name: ClassVar[str] = ""
    requires: ClassVar[tuple[str, ...]] = ()
    preserves: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = ""

    def apply(self, stream: Stream, am: AnalysisManager) -> PassResult:
        raise NotImplementedError

    def __str__(self) -> str:
        opts = [f"{f.name.replace('_', '-')}={getattr(self, f.name)}" for f in dataclasses.fields(self)
                if getattr(self, f.name) != f.default]
        return self.name + ("{" + ",".join(opts) + "}" if opts else "")


def _load(spec: str) -> Any:
    mod, _, attr = spec.partition(":")
    return getattr(importlib.import_module(mod), attr)


class AnalysisManager:
    """Caches analyses of one stream; ``invalidate`` drops what a pass did not preserve."""

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self._cache: dict[str, Any] = {}
        self._stream: Stream | None = None
        self.options = dict(options or {})
        self.computed: dict[str, int] = {}

    def get(self, name: str, stream: Stream) -> Any:
        """The analysis ``name`` of ``stream`` (computed once until invalidated)."""
        if self._stream is not stream:
            self._cache.clear()
            self._stream = stream
        if name not in self._cache:
            fn: Callable[..., Any] = _load(ANALYSES[name])
            self._cache[name] = fn(stream)
            self.computed[name] = self.computed.get(name, 0) + 1
        return self._cache[name]

    def invalidate(self, result: PassResult) -> None:
        if "*" in result.preserved:
            self._stream = result.stream
            return
        keep = {k: v for k, v in self._cache.items() if k in result.preserved}
        self._cache = keep
        self._stream = result.stream


_ITEM = re.compile(r"\s*([a-z][a-z0-9-]*)\s*(?:\{([^{}]*)\})?\s*(?:,|$)")


def get_pass(name: str) -> type[Pass]:
    """The pass class registered as ``name``."""
    if name not in PASSES:
        raise UsageError(f"unknown pass '{name}' (known: {', '.join(PASSES)})")
    try:
        cls = _load(PASSES[name])
    except (ImportError, AttributeError) as e:
        # a broken install must not look like a smaller pipeline: say what failed
        raise UsageError(f"pass '{name}' cannot be loaded ({type(e).__name__}: {e}); "
                         f"reinstall with `pip install -e .`") from None
    return cls


def _convert(value: str, current: Any, pname: str, key: str) -> Any:
    try:
        if isinstance(current, bool):
            if value.lower() not in ("1", "0", "true", "false", "on", "off", "yes", "no"):
                raise ValueError
            return value.lower() in ("1", "true", "on", "yes")
        if isinstance(current, int):
            return int(value, 0)
        if isinstance(current, float):
            return float(value)
    except ValueError:
        raise UsageError(f"pass '{pname}': option {key} expects a {type(current).__name__}, got '{value}'") from None
    return value


def parse_pipeline(text: str, **overrides: Any) -> list[Pass]:
    """Parse ``"dedupe-state,schedule{reorder=opaque}"`` into pass instances.

    ``overrides`` set options on every pass that has a field of that name (the CLI's
    ``--reorder``, ``--target``, ...), before the options given in braces.
    """
    passes: list[Pass] = []
    pos = 0
    text = text.strip()
    if not text:
        return passes
    while pos < len(text):
        m = _ITEM.match(text, pos)
        if not m or m.end() == pos:
            raise UsageError(f"bad pass pipeline near '{text[pos:]}'")
        pos = m.end()
        cls = get_pass(m.group(1))
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kw: dict[str, Any] = {k: v for k, v in overrides.items() if k in fields and v is not None}
        for item in filter(None, (x.strip() for x in (m.group(2) or "").split(","))):
            key, sep, value = item.partition("=")
            key = key.strip().replace("-", "_")
            if not sep or key not in fields:
                raise UsageError(f"pass '{cls.name}': unknown option '{item}'"
                                 f" (options: {', '.join(f.replace('_', '-') for f in fields) or 'none'})")
            default = fields[key].default
            kw[key] = _convert(value.strip(), default, cls.name, key)
        passes.append(cls(**kw))
    return passes


@dataclass
class PassRecord:
    """One pass's run, for ``--time-passes`` and reports."""

    name: str
    seconds: float
    modified: bool
    commands_before: int
    commands_after: int
    report: dict[str, Any]
    verified: bool | None = None


class PassManager:
    """Runs passes in order, optionally verifying after each one.

    ``verify_each``: after every pass that modified the stream, check the IR
    (``Stream.check``) and run the translation validator against the stream
    before the pass; a failure raises :class:`PassError` naming the pass and the
    passes before it.
    """

    def __init__(self, passes: list[Pass], verify_each: bool = False,
                 on_pass: Callable[[Pass, PassResult], None] | None = None, reorder: str = "declared",
                 on_start: Callable[[Pass], None] | None = None) -> None:
        self.passes = passes
        self.verify_each = verify_each
        self.on_pass = on_pass
        self.on_start = on_start
        self.reorder = reorder
        self.records: list[PassRecord] = []

    def run(self, stream: Stream) -> Stream:
        am = AnalysisManager()
        for i, p in enumerate(self.passes):
            if self.on_start:
                self.on_start(p)
            t0 = time.perf_counter()
            try:
                res = p.apply(stream, am)
            except DrawoptError:
                raise
            except Exception as e:  # name the failing pass, as torch.fx's pass manager does
                done = ", ".join(str(q) for q in self.passes[:i]) or "none"
                raise PassError(f"pass '{p}' failed: {type(e).__name__}: {e} (passes before it: {done})") from e
            rec = PassRecord(p.name, time.perf_counter() - t0, res.modified, len(stream), len(res.stream),
                             res.report)
            if self.verify_each and res.modified:
                self._verify(stream, res.stream, p, i)
                rec.verified = True
            am.invalidate(res)
            self.records.append(rec)
            if self.on_pass:
                self.on_pass(p, res)
            stream = res.stream
        return stream

    def _verify(self, before: Stream, after: Stream, p: Pass, i: int) -> None:
        done = ", ".join(str(q) for q in self.passes[:i]) or "none"
        try:
            after.check()
        except ValueError as e:
            raise PassError(f"after pass '{p}': invalid stream: {e} (passes before it: {done})") from None
        verdict = verify_streams(before, after, reorder=self.reorder)
        if verdict is not None:
            raise PassError(f"after pass '{p}': {verdict} (passes before it: {done})")


def verify_streams(before: Stream, after: Stream, reorder: str = "declared") -> str | None:
    """None if ``after`` renders what ``before`` does, else a one-line reason.

    Uses the translation validator (:mod:`drawopt.verify`) when it is built, and
    otherwise compares the effective state of every draw in order.
    """
    try:
        from .verify import verify
    except ImportError:
        from .state import compare_effective_state
        return compare_effective_state(before, after)
    res = verify(before, after, reorder=reorder)
    return None if res.equivalent else res.reason


def optimize(stream: Stream, passes: str | list[Pass] | None = None, *, target: str = "d3d12",
             reorder: str = "declared", verify_each: bool = False,
             on_start: Callable[[Pass], None] | None = None,
             on_pass: Callable[[Pass, PassResult], None] | None = None, **options: Any) -> OptimizeResult:
    """Run a pass pipeline over ``stream``; the result holds the optimized stream and a report.

    ``passes``: a pipeline string, a list of passes, or None for the default
    pipeline of ``target``. Extra ``options`` set pass options by field name; one
    that no pass of the pipeline has, an unknown ``target`` or ``reorder`` raise
    :class:`~drawopt.errors.UsageError`. ``on_start(pass)`` / ``on_pass(pass,
    result)`` are called before / after each pass (the CLI's progress line).

    >>> import drawopt
    >>> from drawopt.gen import generate
    >>> res = drawopt.optimize(generate("quads", 32), passes="merge-instances", target="xbox-one")
    >>> len(res.stream), res.report.after["draw_calls"]
    (10, 1)
    >>> drawopt.optimize(generate("quads", 4), pases="weld")
    Traceback (most recent call last):
    ...
    drawopt.errors.UsageError: optimize: unknown option 'pases' (no pass of the pipeline has it; ...)
    """
    from .result import check_optimize_args, optimize_result

    pipeline = check_optimize_args(passes, target, reorder, options)
    pm = PassManager(pipeline, verify_each=verify_each, reorder=reorder, on_start=on_start, on_pass=on_pass)
    return optimize_result(stream, pm, target, reorder)
