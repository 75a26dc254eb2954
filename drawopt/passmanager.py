"""Pass manager: pass registry, pipeline strings, cached analyses, --verify-each.

A pass is a small dataclass with a kebab-case ``name``; its options are its
fields, so ``mdi{max-count=64}`` sets ``max_count: int | None = None``. The target and the
reorder policy are the pipeline's context (:class:`PipelineContext`), read by every pass from
its analysis manager, not options of any pass.
It declares the analyses it ``requires`` and the ones it ``preserves`` (as in
LLVM's new pass manager); the manager caches analyses and drops those a pass
did not preserve. ``apply`` returns a :class:`PassResult`.

Two post-conditions hold for every run (docs/passes.md, "What the pass manager
guarantees"): the output has no more findings of any rule than the input, and it
verifies against the input. Both are checked once, optimistically, on the output.
Only when that check fails is the pipeline re-run with the per-pass checks: each
modified pass's findings are counted and a pass that adds one is rolled back and
named; then the output is verified, and when it fails the pipeline is re-run
verifying every pass, rolling back the passes whose output fails.

Why the optimistic check gives the same result: where no pass adds a finding and
the output verifies, the per-pass checks would roll nothing back, so their output
is the unchecked run's, pass by pass; where the output adds a finding or fails
verify, the per-pass run is the result. The one difference: a pass that adds a
finding which a later pass removes (say, a flush the ``flush`` pass inserts where
an earlier pass made one necessary) is kept, where per-pass checking rolled it
back; the output still adds no finding and verifies. ``verify_each`` (strict,
debugging) always checks every pass.
"""

from __future__ import annotations

__all__ = [
    "Pass", "PassResult", "AnalysisManager", "PipelineContext", "PassManager", "PASSES", "ANALYSES",
    "parse_pipeline", "get_pass", "PassError", "DEFAULT_PIPELINE", "default_pipeline",
    "option", "check_options", "PassRecord", "check_policy", "record_provenance",
]

import dataclasses
import importlib
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from drawopt.errors import DrawoptError, UsageError
from drawopt.ir.stream import Stream

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
    "scan": "drawopt.analysis.state:scan",
    "state": "drawopt.analysis.state:track",
    "graph": "drawopt.analysis.graph:build_graph",
}
"""Analysis name -> ``module:function(stream)``. The state table (``state``) is built from the
``scan`` and carries it: either one cached gives the other without a second scan."""

RELEASED: tuple[str, ...] = ("state", "scan", "graph")
"""The analyses a pinned stream drops once the passes have left it (:class:`AnalysisManager`)."""

DEFAULT_PIPELINE = "dedupe-state"


def default_pipeline(target: str = "d3d12") -> str:
    """The best safe pipeline for ``target`` (see docs/passes.md)."""
    try:
        from drawopt.analysis.costmodel import default_pipeline as dp
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

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        for name in (*cls.requires, *cls.preserves):
            if name not in ANALYSES and name != "*":
                raise TypeError(f"pass {cls.__name__}: unknown analysis '{name}' in requires/preserves "
                                f"(known: {', '.join(ANALYSES)})")

    def __post_init__(self) -> None:
        check_options(self)

    def apply(self, stream: Stream, am: AnalysisManager) -> PassResult:
        raise NotImplementedError

    def __str__(self) -> str:
        opts = [f"{f.name.replace('_', '-')}={getattr(self, f.name)}" for f in dataclasses.fields(self)
                if getattr(self, f.name) != f.default]
        return self.name + ("{" + ",".join(opts) + "}" if opts else "")


def option(default: Any, *, min: float | None = None, max: float | None = None,
           choices: tuple[str, ...] | None = None, kind: type | None = None) -> Any:
    """A pass option field with its valid range, checked by :func:`check_options` when the pass is made.

    ``min``/``max`` bound a number (inclusive), ``choices`` a string. A ``None`` default
    means "unset" (the pass chooses); ``kind`` is then the type a pipeline string's value
    is read as.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class P(Pass):
    ...     name = "p"
    ...     count: int = option(4, min=1)
    >>> P(count=0)
    Traceback (most recent call last):
    ...
    drawopt.errors.UsageError: pass 'p': option count must be >= 1, got 0
    """
    meta = {"min": min, "max": max, "choices": choices, "kind": kind}
    return field(default=default, metadata={"drawopt": meta})


def check_options(p: Pass) -> None:
    """Raise :class:`UsageError` for an option of ``p`` outside the range its field declares.

    Checked however the pass is made (pipeline string or constructor) and on every
    target, also where the pass would do nothing.
    """
    for f in dataclasses.fields(p):
        meta = f.metadata.get("drawopt")
        if not meta:
            continue
        v = getattr(p, f.name)
        if v is None and f.default is None:
            continue
        key = f.name.replace("_", "-")
        if meta["choices"] is not None and v not in meta["choices"]:
            raise UsageError(f"pass '{p.name}': option {key} must be one of {', '.join(meta['choices'])}, got '{v}'")
        if meta["min"] is not None and v < meta["min"]:
            raise UsageError(f"pass '{p.name}': option {key} must be >= {meta['min']:g}, got {v}")
        if meta["max"] is not None and v > meta["max"]:
            raise UsageError(f"pass '{p.name}': option {key} must be <= {meta['max']:g}, got {v}")


def _load(spec: str) -> Any:
    mod, _, attr = spec.partition(":")
    return getattr(importlib.import_module(mod), attr)


@dataclass(frozen=True)
class PipelineContext:
    """What a whole pipeline runs under: the ``target`` whose cost model decides and the
    ``reorder`` policy (docs/passes.md). Passes read it from their analysis manager
    (``am.target``, ``am.reorder``); it is not an option of any pass.

    >>> PipelineContext("xbox-one").reorder
    'declared'
    """

    target: str = "d3d12"
    reorder: str = "declared"


class AnalysisManager:
    """The analyses of the stream being optimized, computed once and shared by every pass.

    ``get(name, stream)`` computes analysis ``name`` (:data:`ANALYSES`) of ``stream`` the first
    time it is asked for and returns the cached result until a pass changes the stream;
    :meth:`invalidate` then keeps only what the pass declared it ``preserves`` (``"*"``:
    everything; a pass that changed nothing preserves everything). The pass manager asks for
    each pass's ``requires`` before running it. A :meth:`pin` ned stream's analyses outlive
    the stream change (the pipeline's input, for the report), and :meth:`cached` looks one up
    without computing it. Once the passes have left a pinned stream, it keeps the facts put for
    it (its finding counts) but not its :data:`RELEASED` analyses: the largest ones, recomputed
    if asked for again (issue 13: the input's scan and state table were a fifth of the peak).

    >>> from drawopt.gen import generate
    >>> s = generate("quads", 8)
    >>> am = AnalysisManager(PipelineContext("vulkan"))
    >>> am.get("state", s) is am.get("state", s), am.computed, am.target
    (True, {'state': 1}, 'vulkan')
    """

    def __init__(self, context: PipelineContext | None = None, options: dict[str, Any] | None = None) -> None:
        self.context = context or PipelineContext()
        self._cache: dict[str, Any] = {}
        """The analyses of ``_stream`` (the stream being optimized), unless it is pinned."""
        self._stream: Stream | None = None
        self._pinned: dict[int, tuple[Stream, dict[str, Any]]] = {}
        """id(stream) -> (stream, its analyses), for the :meth:`pin` ned streams."""
        self.options = dict(options or {})
        self.computed: dict[str, int] = {}
        """How often each analysis was computed (for tests and ``--time-passes``)."""

    @property
    def target(self) -> str:
        """The pipeline's target (:class:`PipelineContext`)."""
        return self.context.target

    @property
    def reorder(self) -> str:
        """The pipeline's reorder policy (:class:`PipelineContext`)."""
        return self.context.reorder

    def _analyses_of(self, stream: Stream) -> dict[str, Any]:
        pinned = self._pinned.get(id(stream))
        if pinned is not None:
            return pinned[1]
        if self._stream is not stream:
            self._cache = {}
            self._stream = stream
        return self._cache

    def get(self, name: str, stream: Stream) -> Any:
        """The analysis ``name`` of ``stream`` (computed once until invalidated)."""
        if name not in ANALYSES:
            raise KeyError(f"unknown analysis '{name}' (known: {', '.join(ANALYSES)})")
        cache = self._analyses_of(stream)
        if name not in cache:
            table = cache.get("state")
            if name == "scan" and table is not None and table.scan is not None:
                cache[name] = table.scan  # the state table's own scan
                return table.scan
            fn: Callable[..., Any] = _load(ANALYSES[name])
            cache[name] = fn(stream, sc=cache["scan"]) if name == "state" and "scan" in cache else fn(stream)
            self.computed[name] = self.computed.get(name, 0) + 1
        return cache[name]

    def cached(self, name: str, stream: Stream) -> Any | None:
        """The analysis ``name`` of ``stream`` if it was computed and is still valid, else None."""
        pinned = self._pinned.get(id(stream))
        if pinned is not None:
            return pinned[1].get(name)
        return self._cache.get(name) if self._stream is stream else None

    def put(self, name: str, stream: Stream, value: Any) -> None:
        """Record a fact about ``stream`` that a consumer computed (e.g. the post-condition's
        finding counts), for :meth:`cached`; dropped with the stream's other analyses."""
        self._analyses_of(stream)[name] = value

    def pin(self, stream: Stream, analyses: dict[str, Any] | None = None) -> None:
        """Keep ``stream``'s analyses (those computed already and later) after the stream changes;
        ``analyses``: ones known already (another manager's :meth:`pinned`), to start from."""
        if id(stream) not in self._pinned:
            cache = self._cache if self._stream is stream else {}
            self._pinned[id(stream)] = (stream, {**(analyses or {}), **cache})
            if self._stream is stream:
                self._cache = {}  # now the pinned entry's: the current stream's analyses live there

    def pinned(self, stream: Stream) -> dict[str, Any]:
        """A copy of the analyses of ``stream`` if it is pinned, else ``{}``."""
        entry = self._pinned.get(id(stream))
        return dict(entry[1]) if entry is not None else {}

    def invalidate(self, result: PassResult) -> None:
        """The pass that returned ``result`` ran: its new stream keeps only what it preserved
        (a new cache: the stream before, pinned or not, keeps its own, a pinned one less its
        :data:`RELEASED` analyses once the passes have left it)."""
        if result.stream is not self._stream:  # (the same: unchanged, or the pass put analyses of its output)
            before = self._analyses_of(self._stream) if self._stream is not None else {}
            keep = result.preserved | ({"scan"} if "state" in result.preserved else set())  # the table's scan
            self._cache = {k: v for k, v in before.items() if "*" in keep or k in keep}
            self._stream = result.stream
        for s, cache in self._pinned.values():  # left behind: its large analyses go (class docstring)
            if s is not result.stream:
                for name in RELEASED:
                    cache.pop(name, None)


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
    """Parse ``"dedupe-state,mdi{max-count=64}"`` into pass instances.

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
            if default is None:  # an unset-by-default option: read the value as its declared kind
                default = (fields[key].metadata.get("drawopt") or {}).get("kind", str)()
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
    rejected: str | None = None
    """Why the pass's output was discarded (it added a finding, or failed verify), else None."""


class PassManager:
    """Runs passes in order and guards their results.

    ``verify_each``: after every pass that modified the stream, check the IR
    (``Stream.check``) and run the translation validator against the stream
    before the pass; a failure raises :class:`PassError` naming the pass and the
    passes before it. The same mode turns a pass that adds a finding into a
    :class:`PassError` (debugging: stop at the first bad pass).

    Always (the module docstring): the output adds no finding of any rule and, with
    ``verify=True`` (the default), verifies against the input; both are checked once on
    the output, and only when that fails is the pipeline re-run checking each pass (a
    pass that adds a finding is rolled back, its record says why; then verify-each
    with roll-back if the output still fails verify). ``target``/``reorder`` are the
    pipeline's context and are recorded in the output's header.
    """

    def __init__(self, passes: list[Pass], verify_each: bool = False,
                 on_pass: Callable[[Pass, PassResult], None] | None = None, reorder: str = "declared",
                 target: str = "", verify: bool = True,
                 on_start: Callable[[Pass], None] | None = None) -> None:
        self.passes = passes
        self.verify_each = verify_each
        self.on_pass = on_pass
        self.on_start = on_start
        self.reorder = check_policy(reorder)
        if target:
            from drawopt.analysis.costmodel import get_target
            get_target(target)  # an unknown target is a usage error
        self.target = target
        self.verify = verify
        self.records: list[PassRecord] = []
        self.analyses = AnalysisManager(PipelineContext(target or "d3d12", self.reorder))
        self.final: Stream | None = None
        """The last run's output: its state table stays cached for the report (the input's is released,
        :data:`RELEASED`)."""
        self.verified: bool | None = None
        """True when the output was verified against the input, None when not checked."""
        self.on_output: Callable[[Stream], None] | None = None
        """Called with the passes' output once it is known to add no finding, before the final
        verify (which may still send the run back to check each pass, making another output):
        the report starts the output's figures there, beside the verifier."""
        self.stage_seconds: dict[str, float] = {}
        """The last run's time outside the passes (``--time-passes``): ``findings`` (the post-condition's
        finding counts, with the state tracking they need) and ``verify`` (the translation validator)."""

    def run(self, stream: Stream) -> Stream:
        """The optimized stream; its header records the target and reorder policy.

        A pipeline that changed nothing returns ``stream`` itself (header untouched).
        Optimistic (the class docstring): the passes run unchecked and the output is checked
        once; only when it adds a finding or fails verify is the run repeated checking each pass.
        """
        source = stream
        self.verified = None
        self.stage_seconds = {"findings": 0.0, "verify": 0.0}
        if self.verify_each:
            out = self._checked_run(source)
        else:
            out = self._run_passes(source, verify_each=False, check_each=False)
            adds = out is not source and self._adds_findings(source, out)
            if out is not source and not adds and self.on_output is not None:
                self.on_output(out)
            if out is source:
                self.verified = True
            elif adds or (
                    self.verify and self._timed("verify", verify_streams, source, out, self.reorder) is not None):
                # some pass broke a post-condition: today's per-pass checks find and roll it back
                first = self.records
                out = self._checked_run(source)
                self.records = _merge_records(first, self.records)
            else:
                self.verified = True if self.verify else None
        self.final = out  # before its header records the provenance: the stream ``analyses`` knows
        return out if out is source else record_provenance(out, self.target, self.reorder)

    def _adds_findings(self, before: Stream, after: Stream) -> bool:
        """Whether ``after`` has more findings than ``before`` of some rule."""
        b = self._timed("findings", _finding_counts, before, self.analyses)
        a = self._timed("findings", _finding_counts, after, self.analyses)
        return any(n > b.get(r, 0) for r, n in a.items())

    def _timed(self, stage: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, its time added to :attr:`stage_seconds` ``[stage]``."""
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.stage_seconds[stage] = self.stage_seconds.get(stage, 0.0) + time.perf_counter() - t0

    def _checked_run(self, source: Stream) -> Stream:
        """The pipeline with each pass's findings checked (a pass that adds one is rolled back),
        then the output verified (when that fails: re-run verifying each pass, rolling back the
        failing ones); sets :attr:`verified`."""
        out = self._run_passes(source, verify_each=self.verify_each)
        if self.verify and out is not source:
            reason = self._timed("verify", verify_streams, source, out, self.reorder)
            if reason is not None:
                # a pass wrote a wrong rewrite that its own checks missed: find and drop it
                first = self.records
                out = self._run_passes(source, verify_each=True, roll_back=True)
                self.records = _merge_records(first, self.records)
                reason = self._timed("verify", verify_streams, source, out, self.reorder) if out is not source else None
                if reason is not None:  # the chain of verified steps did not compose: keep the input
                    self.records.append(PassRecord("(pipeline)", 0.0, False, len(out), len(source), {},
                                                   False, f"output failed verify: {reason}"))
                    out = source
            self.verified = True
        elif self.verify_each or out is source:
            self.verified = True
        return out

    def _run_passes(self, stream: Stream, verify_each: bool, roll_back: bool = False,
                    check_each: bool = True) -> Stream:
        """Run the passes from ``stream``; ``check_each``: count the findings of each modified
        pass's output and roll back a pass that adds one (:meth:`_check`)."""
        self.records = []
        prev = self.analyses
        am = self.analyses = AnalysisManager(prev.context)
        am.pin(stream, prev.pinned(stream))  # a re-run keeps the input's analyses
        counts = self._timed("findings", _finding_counts, stream, am, "scan")
        for i, p in enumerate(self.passes):
            if self.on_start:
                self.on_start(p)
            t0 = time.perf_counter()
            try:
                for name in p.requires:
                    am.get(name, stream)
                res = p.apply(stream, am)
            except DrawoptError:
                raise
            except Exception as e:  # name the failing pass, as torch.fx's pass manager does
                raise PassError(f"pass '{p}' failed: {type(e).__name__}: {e} (passes before it: "
                                f"{self._before(i)})") from e
            rec = PassRecord(p.name, time.perf_counter() - t0, res.modified, len(stream), len(res.stream),
                             res.report)
            am.invalidate(res)
            if res.modified and check_each:
                rejected, after = self._check(stream, res, p, i, am, counts, verify_each, roll_back)
                if rejected is not None:  # keep the stream before the pass
                    rec.rejected, rec.commands_after = rejected, len(stream)
                    res = PassResult.unchanged(stream, **res.report)
                else:
                    rec.verified = True if verify_each else None
                    counts = after
            self.records.append(rec)
            if self.on_pass:
                self.on_pass(p, res)
            stream = res.stream
        return stream

    def _check(self, before: Stream, res: PassResult, p: Pass, i: int, am: AnalysisManager,
               counts: Counter[str], verify_each: bool, roll_back: bool) -> tuple[str | None, Counter[str]]:
        """Why the pass's output must be discarded (None: keep it), and its findings per rule.

        Raises :class:`PassError` instead in strict mode (``verify_each`` without ``roll_back``).
        """
        after = self._timed("findings", _finding_counts, res.stream, am)
        added = {r: n - counts.get(r, 0) for r, n in after.items() if n > counts.get(r, 0)}
        why = None
        if added:
            why = (f"pass '{p}' added findings: " + ", ".join(f"{n} {r}" for r, n in sorted(added.items()))
                   + f" (passes before it: {self._before(i)})")
        elif verify_each:
            try:
                self._timed("verify", self._verify, before, res.stream, p, i)
            except PassError as e:
                why = str(e)
        if why is not None and verify_each and not roll_back:
            raise PassError(why)
        return why, (counts if why else after)

    def _before(self, i: int) -> str:
        return ", ".join(str(q) for q in self.passes[:i]) or "none"

    def _verify(self, before: Stream, after: Stream, p: Pass, i: int) -> None:
        try:
            after.check()
        except ValueError as e:
            raise PassError(f"after pass '{p}': invalid stream: {e} (passes before it: {self._before(i)})") from None
        verdict = verify_streams(before, after, reorder=self.reorder)
        if verdict is not None:
            raise PassError(f"after pass '{p}': {verdict} (passes before it: {self._before(i)})")


def check_policy(reorder: str) -> str:
    """``reorder``, checked: a known policy (``none``, ``declared``, ``opaque``).

    The policy is the pipeline's context (:class:`PipelineContext`), not a pass option, so no
    pass can reorder more than the run allows: every pass reads ``am.reorder``.

    >>> check_policy("declared")
    'declared'
    >>> check_policy("sometimes")
    Traceback (most recent call last):
    ...
    drawopt.errors.UsageError: unknown reorder policy 'sometimes' (known: none, declared, opaque)
    """
    from drawopt.ir.stream import REORDER_POLICIES

    if reorder not in REORDER_POLICIES:
        raise UsageError(f"unknown reorder policy '{reorder}' (known: {', '.join(REORDER_POLICIES)})")
    return reorder


def _finding_counts(stream: Stream, am: AnalysisManager, analysis: str = "state") -> Counter[str]:
    """Findings per rule of ``stream``; the rules read its scan, got through ``analysis`` (cached for
    the next pass and the report): ``"state"`` (the default: a pass's output, whose state table the
    next pass or the report asks for) or ``"scan"`` (the pipeline's input: the report's input table
    is tracked again anyway, as the input's analyses are released, and the first pass
    ``dedupe-state`` reads only the scan; the table's other half was a fifth of the stage at 100k)."""
    from drawopt.validate import finding_counts

    counts = am.cached("finding_counts", stream)
    if counts is None:
        counts = finding_counts(stream, am.get(analysis, stream))
        am.put("finding_counts", stream, counts)
    return counts


def _merge_records(first: list[PassRecord], second: list[PassRecord]) -> list[PassRecord]:
    """The re-run's records, with the first run's times (the re-run also verified)."""
    for a, b in zip(first, second):
        b.seconds += a.seconds
    return second


def record_provenance(stream: Stream, target: str, reorder: str) -> Stream:
    """``stream`` with ``target``/``reorder`` recorded in its header (a shallow copy when they change).

    >>> from drawopt.ir.stream import StreamBuilder
    >>> record_provenance(StreamBuilder().build(), "vulkan", "opaque").header.target
    'vulkan'
    """
    h = stream.header
    if (h.target, h.reorder) == (target or h.target, reorder or h.reorder):
        return stream
    header = dataclasses.replace(h, target=target or h.target, reorder=reorder or h.reorder)
    return dataclasses.replace(stream, header=header)


def verify_streams(before: Stream, after: Stream, reorder: str = "declared") -> str | None:
    """None if ``after`` renders what ``before`` does, else a one-line reason.

    Uses the translation validator (:mod:`drawopt.verify`) when it is built, and
    otherwise compares the effective state of every draw in order.
    """
    try:
        from drawopt.verify import verify
    except ImportError:
        from drawopt.analysis.state import compare_effective_state
        return compare_effective_state(before, after)
    res = verify(before, after, reorder=reorder)
    return None if res.equivalent else res.reason
