"""Declarations: resources, descriptor heaps and views, root signatures, pipelines.

Declarations are few (hundreds, not millions), so they are plain dataclasses held
in a :class:`Decls` table. Every declaration has a global index (its position in
declaration order); commands refer to declarations by that index.
"""

from __future__ import annotations

__all__ = [
    "Buffer", "Texture", "Target", "Depth", "Heap", "View", "RootParam", "RootSig",
    "Pipeline", "Decl", "Decls", "Contract", "PerDrawClause", "parse_contract", "format_contract", "BLENDS",
    "DEPTH_FUNCS", "HEAP_TYPES", "VIEW_KINDS", "SHADER_STAGES", "PIPELINE_KEYS", "LIFT_VALUES", "resolve_lift",
    "lift_items", "check_contract", "LiftError", "ContractError", "CONTRACT_CLAUSES", "CONTRACT_FLAGS",
    "PERDRAW_CLAUSES", "X_BASES",
]

import re
from dataclasses import MISSING, dataclass, field, fields
from functools import cached_property
from typing import Any, ClassVar, Union

import numpy as np

HEAP_TYPES = ("CBV_SRV_UAV", "SAMPLER")
VIEW_KINDS = ("srv", "uav", "cbv", "sampler")
ROOT_PARAM_KINDS = ("table", "constants", "cbv", "srv", "uav")
BLENDS = ("opaque", "alpha", "additive", "premultiplied", "multiply", "min", "max")
DEPTH_FUNCS = ("never", "less", "equal", "lequal", "greater", "notequal", "gequal", "always")
SHADER_STAGES = ("vs", "hs", "ds", "gs", "ps", "cs")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")


def check_name(name: str) -> str:
    """Return ``name`` if it is a legal identifier, else raise ``ValueError``."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(f"invalid name {name!r}")
    return name


@dataclass
class Buffer:
    """A buffer of ``size`` bytes.

    ``cpu``: the CPU writes it (its ``data``, if any, is known at record time).
    ``frontend``: the GPU front end reads it (indirect args, count or index data),
    possibly in another command list; a GPU writer of it needs the seed's flushes
    even when no reader follows in this stream (async compute).
    ``data``: initial contents as little-endian 32-bit words (``uint32``), at most
    ``size // 4`` of them; the rest of the buffer is zero. Generated args buffers and
    per-draw arrays carry their contents here.
    """

    kind: ClassVar[str] = "buffer"
    name: str
    size: int
    cpu: bool = False
    data: np.ndarray | None = None
    frontend: bool = False

    def __post_init__(self) -> None:
        check_name(self.name)
        if not (0 < int(self.size) < 2**63):
            raise ValueError(f"buffer '{self.name}': size must be in 1..2^63-1")
        self.size = int(self.size)
        if self.data is not None:
            d = np.asarray(self.data)
            if d.ndim != 1 or (d.size and (d.min() < 0 or d.max() > 0xFFFFFFFF)):
                raise ValueError(f"buffer '{self.name}': data must be 32-bit words")
            self.data = np.ascontiguousarray(d, dtype=np.uint32)
            if self.data.size * 4 > self.size:
                raise ValueError(
                    f"buffer '{self.name}': {self.data.size * 4} bytes of data exceed its size {self.size}")

    def words(self, offset: int, count: int) -> np.ndarray:
        """``count`` 32-bit words at byte ``offset`` (zeros past the data)."""
        if offset % 4:
            raise ValueError("unaligned word read")
        out = np.zeros(count, dtype=np.uint32)
        if self.data is not None:
            w0 = offset // 4
            avail = self.data[w0:w0 + count]
            out[:avail.size] = avail
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Buffer):
            return NotImplemented
        a = self.data if self.data is not None else np.zeros(0, np.uint32)
        b = other.data if other.data is not None else np.zeros(0, np.uint32)
        return (self.name, self.size, self.cpu, self.frontend) == \
            (other.name, other.size, other.cpu, other.frontend) and \
            np.array_equal(a, b) and (self.data is None) == (other.data is None)


@dataclass
class Texture:
    """A sampled texture (read through SRVs)."""

    kind: ClassVar[str] = "texture"
    name: str
    width: int
    height: int
    format: str

    def __post_init__(self) -> None:
        check_name(self.name)
        if not (0 < self.width <= 65536 and 0 < self.height <= 65536):
            raise ValueError(f"{self.kind} '{self.name}': size must be 1..65536")
        check_name(self.format)


@dataclass
class Target(Texture):
    """A render target."""

    kind: ClassVar[str] = "target"


@dataclass
class Depth(Texture):
    """A depth(-stencil) target."""

    kind: ClassVar[str] = "depth"


@dataclass
class Heap:
    """A shader-visible descriptor heap of ``size`` slots."""

    kind: ClassVar[str] = "heap"
    name: str
    type: str
    size: int

    def __post_init__(self) -> None:
        check_name(self.name)
        if self.type not in HEAP_TYPES:
            raise ValueError(f"heap '{self.name}': type must be one of {', '.join(HEAP_TYPES)}")
        if not (0 < self.size <= 1_000_000):
            raise ValueError(f"heap '{self.name}': size must be 1..1000000")


@dataclass
class View:
    """A descriptor in slot ``slot`` of ``heap``: a view of ``resource`` (None for samplers)."""

    kind: ClassVar[str] = "view"
    heap: str
    slot: int
    view: str
    resource: str | None = None

    @property
    def name(self) -> str:
        return f"{self.heap}[{self.slot}]"


@dataclass(frozen=True)
class RootParam:
    """A root parameter: a descriptor table (``ranges`` of (view kind, count)),
    ``count`` 32-bit constants, or a root descriptor (cbv/srv/uav)."""

    kind: str
    count: int = 0
    ranges: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ROOT_PARAM_KINDS:
            raise ValueError(f"unknown root parameter kind {self.kind!r}")
        if self.kind == "constants" and not (1 <= self.count <= 64):
            raise ValueError("constants(N): N must be 1..64")
        if self.kind == "table":
            if not self.ranges:
                raise ValueError("table(...) needs at least one range")
            for k, n in self.ranges:
                if k not in VIEW_KINDS or not (1 <= n <= 1_000_000):
                    raise ValueError(f"bad table range ({k},{n})")

    @property
    def table_size(self) -> int:
        return sum(n for _, n in self.ranges)

    def __str__(self) -> str:
        if self.kind == "table":
            return "table(" + ",".join(f"{k},{n}" for k, n in self.ranges) + ")"
        if self.kind == "constants":
            return f"constants({self.count})"
        return self.kind

    @classmethod
    def parse(cls, text: str) -> RootParam:
        m = re.fullmatch(r"([a-z]+)(?:\((.*)\))?", text)
        if not m:
            raise ValueError(f"bad root parameter {text!r}")
        kind, inner = m.group(1), m.group(2)
        if kind == "table":
            parts = (inner or "").split(",")
            if len(parts) % 2 or not inner:
                raise ValueError(f"bad table {text!r}: expected table(kind,count[,kind,count...])")
            ranges = tuple((parts[i], _int(parts[i + 1])) for i in range(0, len(parts), 2))
            return cls("table", ranges=ranges)
        if kind == "constants":
            if inner is None:
                raise ValueError("constants needs a count: constants(N)")
            return cls("constants", count=_int(inner))
        if inner is not None:
            raise ValueError(f"root descriptor {kind} takes no arguments")
        return cls(kind)


@dataclass
class RootSig:
    """A root signature: an ordered list of root parameters (at most 16)."""

    kind: ClassVar[str] = "rootsig"
    name: str
    params: tuple[RootParam, ...]

    def __post_init__(self) -> None:
        check_name(self.name)
        if len(self.params) > 16:
            raise ValueError(f"rootsig '{self.name}': at most 16 root parameters")


def _int(text: str) -> int:
    try:
        return int(text, 0)
    except (TypeError, ValueError):
        raise ValueError(f"expected an integer, got {text!r}") from None


_CONTRACT_ITEM = re.compile(r"([a-z_][a-z0-9_]*)(?:\(([^()]*)\))?")

CONTRACT_CLAUSES: dict[str, tuple[str, ...]] = {
    "x": ("vertex_bits", "perdraw", "lift", "max_index", "base"),
    "instance_data": ("perdraw", "lift"),
    "draw_data": ("perdraw", "lift"),
    "no_primitive_id": (),
    "no_vertex_id": (),
    "order_independent": (),
    "never_merge": (),
}
"""Every contract clause and the keys it takes (docs/format.md, docs/architecture.md "Rewrite contracts")."""
CONTRACT_REQUIRED = {"x": ("vertex_bits",), "instance_data": ("perdraw",), "draw_data": ("perdraw",)}
PERDRAW_CLAUSES = ("x", "instance_data", "draw_data")
"""The per-draw clauses, in the order their readers consult them."""
CONTRACT_FLAGS = ("no_primitive_id", "no_vertex_id", "order_independent", "never_merge")
"""The clauses without keys: each is a promise about the shaders (a :class:`Contract` flag)."""
X_BASES = ("none", "vertex")
"""Values of ``x(...,base=)``: the base vertex is in the record (``none``) or in IndexOffset."""
_INT_KEYS = ("vertex_bits", "perdraw", "max_index")


def _contract_syntax(text: str) -> dict[str, dict[str, str]]:
    """The clauses of contract ``text`` as ``{clause: {key: value as written}}``, in the order
    written; raises ``ValueError`` (the message says what is wrong, not where) on anything the
    grammar of docs/format.md does not allow. ``lift=`` lists are checked later, against the
    pipeline's root signature (:func:`check_contract`)."""
    out: dict[str, dict[str, str]] = {}
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _CONTRACT_ITEM.match(text, pos)
        if not m:
            raise ValueError(f"bad contract near {text[pos:]!r}")
        name, inner = m.group(1), m.group(2)
        if name not in CONTRACT_CLAUSES:
            raise ValueError(f"unknown contract clause {name!r} (known: {', '.join(CONTRACT_CLAUSES)})")
        if name in out:
            raise ValueError(f"contract clause {name!r} given twice")
        params: dict[str, str] = {}
        if inner:
            for kv in inner.split(","):
                k, sep, v = kv.partition("=")
                if not sep or not k or not v:
                    raise ValueError(f"contract {name}: expected key=value, got {kv!r}")
                if k not in CONTRACT_CLAUSES[name]:
                    raise ValueError(f"contract {name}: unknown key {k!r}")
                if k in params:
                    raise ValueError(f"contract {name}: key {k!r} given twice")
                params[k] = v
        missing = [k for k in CONTRACT_REQUIRED.get(name, ()) if k not in params]
        if missing:
            raise ValueError(f"contract {name}: missing {', '.join(missing)}")
        for k, v in params.items():
            if k in _INT_KEYS and not (v.isascii() and v.isdigit()):
                raise ValueError(f"contract {name}: {k} must be an integer")
        if name == "x" and not (1 <= int(params["vertex_bits"]) <= 31):
            raise ValueError("contract x: vertex_bits must be 1..31")
        if params.get("base", "none") not in X_BASES:
            raise ValueError(f"contract {name}: base must be {' or '.join(X_BASES)}")
        out[name] = params
        pos = m.end()
        if pos < len(text):
            if text[pos] != ",":
                raise ValueError(f"bad contract near {text[pos:]!r}")
            pos += 1
    return out


@dataclass(frozen=True)
class PerDrawClause:
    """One per-draw clause of a rewrite contract: ``x(...)``, ``instance_data(...)`` or
    ``draw_data(...)`` (docs/architecture.md, "Rewrite contracts").

    ``perdraw``: root parameter P of the per-draw array (None: not named; only ``x`` may omit
    it). ``lift_text``: the ``lift=`` list as written (``""``: none); :attr:`lift` its items.
    ``x`` only (None / the default on the array clauses): ``vertex_bits`` K, ``max_index`` M,
    ``base`` (``"none"`` or ``"vertex"``).

    >>> c = Contract("x(vertex_bits=16,perdraw=2,lift=0+1.3)").x
    >>> c.vertex_bits, c.perdraw, c.lift, c.named_params, c.record_words
    (16, 2, ((0, 0), (1, 3)), (0, 1, 2), 4)
    """

    name: str
    perdraw: int | None = None
    lift_text: str = ""
    vertex_bits: int | None = None
    max_index: int | None = None
    base: str = "none"

    @cached_property
    def lift(self) -> tuple[tuple[int, int], ...]:
        """The lift items ``(parameter, word)`` in record order (:func:`lift_items`; the list is
        checked against the root signature when the pipeline is declared: :func:`check_contract`)."""
        return lift_items(self.lift_text)

    @property
    def lift_params(self) -> tuple[int, ...]:
        """The root parameters with at least one lift item (sorted)."""
        return tuple(sorted({q for q, _ in self.lift}))

    @property
    def named_params(self) -> tuple[int, ...]:
        """Every root parameter the clause names: ``perdraw`` and each lift item's (sorted)."""
        return tuple(sorted({*self.lift_params, *(() if self.perdraw is None else (self.perdraw,))}))

    @property
    def record_words(self) -> int:
        """32-bit words of one per-draw record: base vertex, start instance, one per lift item."""
        return 2 + len(self.lift)

    def resolve(self, rs: RootSig) -> tuple[tuple[tuple[int, int], ...], tuple[str, ...]]:
        """The lift items against root signature ``rs`` and the root-parameter kind of each
        (:func:`resolve_lift`; raises :class:`LiftError` where they do not fit)."""
        return resolve_lift(self.lift_text, rs, -1 if self.perdraw is None else self.perdraw)


@dataclass(frozen=True, repr=False)
class Contract:
    """A pipeline's rewrite contract: what its shaders promise (docs/format.md,
    docs/architecture.md "Rewrite contracts"). The one parser and owner of the clauses.

    Built from its text, which is parsed and checked once (``ValueError`` saying what is
    wrong); :attr:`text` is then the printed form (the clauses and keys in the order written,
    values as written). The per-draw clauses are :class:`PerDrawClause` fields (None: not
    declared), the other clauses flags. The empty contract (``Contract()``, false) promises
    nothing: no rewrite the shader could observe.

    >>> c = Contract("x(vertex_bits=16,perdraw=3),draw_data(perdraw=2),no_primitive_id")
    >>> c.x.vertex_bits, c.array.name, c.perdraw_params, c.no_primitive_id, c.never_merge
    (16, 'draw_data', (3, 2), True, False)
    >>> c.names
    ('x', 'draw_data', 'no_primitive_id')
    >>> str(c) == c.text == "x(vertex_bits=16,perdraw=3),draw_data(perdraw=2),no_primitive_id"
    True
    >>> bool(Contract()), Contract("order_independent,").text
    (False, 'order_independent')
    """

    text: str = ""
    names: tuple[str, ...] = field(init=False, default=())
    """The clauses declared, in the order written."""
    x: PerDrawClause | None = field(init=False, default=None)
    instance_data: PerDrawClause | None = field(init=False, default=None)
    draw_data: PerDrawClause | None = field(init=False, default=None)
    no_primitive_id: bool = field(init=False, default=False)
    no_vertex_id: bool = field(init=False, default=False)
    order_independent: bool = field(init=False, default=False)
    never_merge: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"a contract is built from its text, not {type(self.text).__name__}")
        syntax = _contract_syntax(self.text)
        set_ = object.__setattr__
        set_(self, "text", ",".join(
            name + ("(" + ",".join(f"{k}={v}" for k, v in kv.items()) + ")" if kv else "")
            for name, kv in syntax.items()))
        set_(self, "names", tuple(syntax))
        for name, kv in syntax.items():
            if name in CONTRACT_FLAGS:
                set_(self, name, True)
                continue
            ints = {k: int(kv[k]) for k in _INT_KEYS if k in kv}
            set_(self, name, PerDrawClause(name, ints.get("perdraw"), kv.get("lift", ""), ints.get("vertex_bits"),
                                           ints.get("max_index"), kv.get("base", "none")))

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Contract({self.text!r})"

    def __bool__(self) -> bool:
        return bool(self.text)

    @property
    def clauses(self) -> tuple[PerDrawClause, ...]:
        """The per-draw clauses declared, in :data:`PERDRAW_CLAUSES` order."""
        return tuple(c for c in (self.x, self.instance_data, self.draw_data) if c is not None)

    def clause(self, name: str) -> PerDrawClause | None:
        """The per-draw clause called ``name`` (one of :data:`PERDRAW_CLAUSES`), or None."""
        if name not in PERDRAW_CLAUSES:
            raise KeyError(f"{name!r} is not a per-draw clause ({', '.join(PERDRAW_CLAUSES)})")
        return getattr(self, name)

    @property
    def array(self) -> PerDrawClause | None:
        """The *array clause*: the one non-``DrawIndexedX`` draws read their per-draw record
        through -- ``instance_data``, else ``draw_data`` (synonyms; ``instance_data`` governs
        where both are declared), or None. With an ``x`` clause too, ``DrawIndexedX`` calls read
        theirs through ``x`` (docs/architecture.md, "Rewrite contracts")."""
        return self.instance_data if self.instance_data is not None else self.draw_data

    @property
    def perdraw_params(self) -> tuple[int, ...]:
        """The ``perdraw`` root parameter of each per-draw clause that names one, in
        :data:`PERDRAW_CLAUSES` order, without repeats."""
        return tuple(dict.fromkeys(c.perdraw for c in self.clauses if c.perdraw is not None))


def parse_contract(text: str) -> Contract:
    """Parse ``x(vertex_bits=16,perdraw=1),no_primitive_id`` into a :class:`Contract`.

    Known clauses (see docs/format.md): ``x(vertex_bits=K[,perdraw=P][,lift=A+B]
    [,max_index=M][,base=vertex|none])``, ``instance_data(perdraw=P[,lift=...])``,
    ``draw_data(perdraw=P[,lift=...])``, ``no_primitive_id``, ``no_vertex_id``,
    ``order_independent``, ``never_merge``.

    >>> parse_contract("no_vertex_id,x(vertex_bits=20)").x.vertex_bits
    20
    """
    return Contract(text)


def format_contract(c: Contract) -> str:
    """Inverse of :func:`parse_contract`: the contract's printed form (:attr:`Contract.text`)."""
    return c.text


LIFT_VALUES = {"table": 1, "cbv": 2, "srv": 2}
"""Values a lift item ``P.k`` may name per root-parameter kind (root constants: their count):
a table's heap slot, a root view's byte offset as low / high words."""
_LIFT_ITEM = re.compile(r"([0-9]+)(?:\.([0-9]+))?")


class LiftError(ValueError):
    """A bad ``lift=`` list; ``index`` is the offending item's position in ``text.split("+")``."""

    def __init__(self, message: str, index: int):
        super().__init__(message)
        self.index = index


class ContractError(ValueError):
    """A contract clause that does not fit its pipeline's root signature.

    ``clause`` and ``key`` name the value at fault (``x`` / ``perdraw``, ...), ``item`` the
    ``+``-separated lift item (None: the whole value); :meth:`offset_in` finds it in the
    contract's text, so that readers can point at it.
    """

    def __init__(self, message: str, clause: str, key: str, item: int | None = None):
        super().__init__(message)
        self.clause, self.key, self.item = clause, key, item

    def offset_in(self, text: str) -> int | None:
        """Character offset of the value at fault in contract ``text`` (as written), or None."""
        m = re.search(rf"(?:^|,){re.escape(self.clause)}\(([^()]*)\)", text)
        if m is None:
            return None
        pos = m.start(1)
        for kv in m.group(1).split(","):
            k, sep, v = kv.partition("=")
            if sep and k == self.key:
                pos += len(k) + 1
                if self.item is not None:
                    parts = v.split("+")
                    pos += sum(len(t) + 1 for t in parts[:self.item]) if self.item < len(parts) else 0
                return pos
            pos += len(kv) + 1
        return None


def lift_items(text: str) -> tuple[tuple[int, int], ...]:
    """The syntax of a ``lift=A+B`` list: each item ``P`` or ``P.k`` as ``(P, k)`` (``P`` alone
    is ``P.0``), in record order. :func:`resolve_lift` checks the items against a root
    signature; this is its first step, for readers that need only the parameter indices of
    an already validated list.

    ``""`` (no list) has no items. Raises :class:`LiftError` (a ValueError) for an empty
    item, an item that is not ``P`` or ``P.k``, or an item listed twice.
    """
    out: list[tuple[int, int]] = []
    if not text.strip():  # no list (a contract cannot spell an empty one: ``lift=`` is rejected)
        return ()
    for j, item in enumerate(text.split("+")):
        m = _LIFT_ITEM.fullmatch(item.strip())
        if not m:
            if not item.strip():
                raise LiftError("lift list has an empty item (items are P or P.k, '+'-separated)", j)
            raise LiftError(f"lift item '{item.strip()}' is not P or P.k", j)
        qw = (int(m.group(1)), int(m.group(2) or 0))
        if qw in out:
            raise LiftError(f"lift item '{item.strip()}' is listed twice", j)
        out.append(qw)
    return tuple(out)


def resolve_lift(text: str, rs: RootSig, perdraw: int) -> tuple[tuple[tuple[int, int], ...], tuple[str, ...]]:
    """A contract clause's ``lift=A+B`` list against root signature ``rs``: the items
    ``(parameter, value)`` in record order and the root-parameter kind of each.

    The one reader of lift lists: the load-time check (:meth:`Decls.add`), the passes, the
    state masks and the verifier all resolve them here. Raises :class:`LiftError` (a
    ValueError; the message says which item and why) for a malformed list
    (:func:`lift_items`), an item that names the per-draw parameter ``perdraw`` or no
    parameter of ``rs``, or names a value the parameter does not have (:data:`LIFT_VALUES`;
    root constants: their count).
    """
    lift = lift_items(text)
    kinds: list[str] = []
    for j, (q, w) in enumerate(lift):
        item = text.split("+")[j].strip()
        if q == perdraw:
            raise LiftError(f"lift item '{item}' names the perdraw parameter (items name root parameters "
                            "other than perdraw)", j)
        if not 0 <= q < min(len(rs.params), 16):
            raise LiftError(f"lift item '{item}' does not name a root parameter other than perdraw "
                            f"('{rs.name}' has {len(rs.params)})", j)
        rp = rs.params[q]
        if w >= (rp.count if rp.kind == "constants" else LIFT_VALUES.get(rp.kind, 0)):
            raise LiftError(f"lift item '{item}': root parameter {q} ({rp}) has no value {w}", j)
        kinds.append(rp.kind)
    return lift, tuple(kinds)


def check_contract(p: Pipeline, rs: RootSig | None) -> None:
    """Check pipeline ``p``'s per-draw clauses against its root signature ``rs`` (None: no
    ``root=``): each ``perdraw=P`` names a parameter of ``rs`` and each ``lift=`` list
    resolves (:func:`resolve_lift`). Raises :class:`ContractError` saying which clause and
    value.

    The *kind* of the ``perdraw`` parameter is not checked here: SPEC.md's own example
    declares ``x(vertex_bits=16,perdraw=1)`` on a root-constants parameter, so such a
    contract loads, and the passes that would use it decline it (pack-x and mdi need a
    root SRV or CBV there)."""
    for c in p.contract.clauses:
        where = f"pipeline '{p.name}': contract {c.name}"
        if c.perdraw is not None and (rs is None or c.perdraw >= len(rs.params)):
            raise ContractError(f"{where}: perdraw={c.perdraw} is not a root parameter"
                                + ("" if rs is not None else " (the pipeline has no root=)"), c.name, "perdraw")
        if c.lift_text:
            if rs is None:
                raise ContractError(f"{where}: lift= needs root= (lift items name root parameters)", c.name, "lift")
            try:
                c.resolve(rs)
            except LiftError as e:
                raise ContractError(f"{where}: {e}", c.name, "lift", e.index) from None


PIPELINE_KEYS = (
    *SHADER_STAGES, "layout", "blend", "depth", "topology", "root", "params", "reads",
    "writes", "uav_stage", "contract", "gs_maxverts", "gs_vertsize", "gs_instances",
    "gs_invertsize", "gs_ratio",
)


@dataclass
class Pipeline:
    """A pipeline state object and what the optimizer must know about its shaders.

    ``layout``: ``"none"`` for vertex pulling, else the input layout's name.
    ``depth``: ``"off"`` or ``FUNC`` or ``FUNC,write``.
    ``params``: root parameter indices the shaders read (None: all of ``root``).
    ``reads`` / ``writes``: resources (or ``heap[slot]`` views) read / written through
    SRVs / UAVs besides the bound tables. ``uav_stage``: the stage that writes them.
    ``contract``: the rewrite contract (:func:`parse_contract`); empty = no rewrite
    the shader could observe.
    GS output: ``gs_maxverts`` x ``gs_vertsize`` bytes x ``gs_instances`` per input
    primitive; ``gs_invertsize`` bytes per input vertex; ``gs_ratio`` unique input
    vertices per primitive (0 = the driver's assumption of 1).
    """

    kind: ClassVar[str] = "pipeline"
    name: str
    vs: str | None = None
    hs: str | None = None
    ds: str | None = None
    gs: str | None = None
    ps: str | None = None
    cs: str | None = None
    layout: str = "none"
    blend: str = "opaque"
    depth: str = "off"
    topology: str = "triangle"
    root: str | None = None
    params: tuple[int, ...] | None = None
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    uav_stage: str | None = None
    contract: Contract = field(default_factory=Contract)
    gs_maxverts: int = 0
    gs_vertsize: int = 0
    gs_instances: int = 1
    gs_invertsize: int = 0
    gs_ratio: float = 0.0

    def __post_init__(self) -> None:
        check_name(self.name)
        if self.cs is not None and any(getattr(self, s) for s in ("vs", "hs", "ds", "gs", "ps")):
            raise ValueError(f"pipeline '{self.name}': a compute pipeline has only cs")
        if self.cs is None and self.vs is None:
            raise ValueError(f"pipeline '{self.name}': needs vs (graphics) or cs (compute)")
        if (self.hs is None) != (self.ds is None):
            raise ValueError(f"pipeline '{self.name}': hs and ds come together")
        if self.blend not in BLENDS:
            raise ValueError(f"pipeline '{self.name}': blend must be one of {', '.join(BLENDS)}")
        d = self.depth.split(",")
        if not (self.depth == "off" or (d[0] in DEPTH_FUNCS and d[1:] in ([], ["write"]))):
            raise ValueError(f"pipeline '{self.name}': depth must be off, FUNC or FUNC,write")
        if self.topology not in ("point", "line", "triangle", "patch"):
            raise ValueError(f"pipeline '{self.name}': topology must be point, line, triangle or patch")
        if self.uav_stage is None:
            self.uav_stage = "cs" if self.cs else ("ps" if self.ps else "vs")
        if self.uav_stage not in SHADER_STAGES or not getattr(self, self.uav_stage):
            raise ValueError(f"pipeline '{self.name}': uav_stage must name one of its stages")
        if isinstance(self.contract, str):
            self.contract = Contract(self.contract)
        elif not isinstance(self.contract, Contract):
            raise TypeError(f"pipeline '{self.name}': contract must be a Contract or its text")
        for k in ("gs_maxverts", "gs_vertsize", "gs_invertsize"):
            if not (0 <= getattr(self, k) <= 1 << 20):
                raise ValueError(f"pipeline '{self.name}': {k} out of range")
        if not (1 <= self.gs_instances <= 32):
            raise ValueError(f"pipeline '{self.name}': gs_instances must be 1..32")
        if not (0 <= self.gs_ratio <= 64):
            raise ValueError(f"pipeline '{self.name}': gs_ratio must be 0..64")

    @property
    def is_compute(self) -> bool:
        return self.cs is not None

    @property
    def tessellation(self) -> bool:
        return self.hs is not None

    @property
    def vertex_pulling(self) -> bool:
        return self.layout == "none"

    @property
    def depth_test(self) -> bool:
        return self.depth != "off"

    @property
    def depth_write(self) -> bool:
        return self.depth.endswith(",write")

    @property
    def order_independent(self) -> bool:
        return self.contract.order_independent

    @property
    def never_merge(self) -> bool:
        return self.contract.never_merge

    @property
    def x_vertex_bits(self) -> int | None:
        """K of the DrawIndexedX draw-id contract, or None if the pipeline has none."""
        return self.contract.x.vertex_bits if self.contract.x is not None else None

    @property
    def x_clause(self) -> PerDrawClause | None:
        """The ``x`` clause where ``DrawIndexedX`` calls read their record through it: the
        pipeline declares one and pulls its vertices (docs/architecture.md, "Rewrite
        contracts"); else None.

        >>> Pipeline("p", vs="v", contract="x(vertex_bits=16)").x_clause.vertex_bits
        16
        >>> Pipeline("p", vs="v", layout="pos", contract="x(vertex_bits=16)").x_clause is None
        True
        """
        return self.contract.x if self.vertex_pulling else None

    @property
    def perdraw_params(self) -> tuple[int, ...]:
        """The ``perdraw`` root parameter of each per-draw clause (``x``, ``instance_data``,
        ``draw_data``) that names one, in that order, without repeats
        (:attr:`Contract.perdraw_params`).

        >>> Pipeline("p", vs="v", contract="x(vertex_bits=16,perdraw=3),draw_data(perdraw=2)").perdraw_params
        (3, 2)
        """
        return self.contract.perdraw_params

    def read_params(self, nparams: int) -> tuple[int, ...]:
        """The root parameters this pipeline's draws (or dispatches) observe, given that its
        root signature has ``nparams`` of them: ``params=`` (all of them by default), plus the
        ``perdraw`` parameter of every per-draw contract clause -- SPEC: a pipeline contract's
        ``perdraw`` root parameter is observed by that pipeline's draws, whether or not
        ``params=`` lists it (the shader reads its per-draw array there). Sorted; parameters
        outside ``0 .. nparams - 1`` are left out (a pipeline without ``root=`` reads none).

        The one owner of this rule: the state masks (:mod:`drawopt.analysis.state`), the resource
        access model (:mod:`drawopt.analysis.access`), the verifier's pipeline model and the replayer
        call it.

        >>> Pipeline("p", vs="v", root="r", params=(0, 1), contract="x(vertex_bits=16,perdraw=2)").read_params(3)
        (0, 1, 2)
        >>> Pipeline("p", vs="v", root="r").read_params(2)
        (0, 1)
        """
        base = range(nparams) if self.params is None else self.params
        return tuple(sorted(q for q in {*base, *self.perdraw_params} if 0 <= q < nparams))

    @property
    def observes_gs_params(self) -> bool:
        """Whether this pipeline's draws observe the GS parameters (``GSSetParameters``): a
        graphics pipeline with a GS, or with tessellation (hs/ds) -- onchip GS mode forces
        tessellation always-offchip (gssetparameters.txt), so a tessellation draw sees the
        mode. The state masks call this (which GS sets dedupe-state may drop).

        >>> Pipeline("t", vs="v", hs="h", ds="d").observes_gs_params
        True
        >>> Pipeline("p", vs="v").observes_gs_params
        False
        """
        return not self.is_compute and (self.gs is not None or self.tessellation)

    @property
    def array_clause(self) -> str | None:
        """The name of the array clause (:attr:`Contract.array`): ``instance_data``,
        ``draw_data`` or None."""
        c = self.contract.array
        return c.name if c is not None else None


Decl = Union[Buffer, Texture, Target, Depth, Heap, View, RootSig, Pipeline]
DECL_TYPES: dict[str, type] = {
    c.kind: c for c in (Buffer, Texture, Target, Depth, Heap, View, RootSig, Pipeline)
}


class Decls:
    """All declarations of a stream, in declaration order, with a global index.

    Names are unique across kinds; views are named ``heap[slot]``. ``add`` checks
    that everything a declaration refers to was declared before it.
    """

    def __init__(self) -> None:
        self.items: list[Decl] = []
        self.index: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self):
        return iter(self.items)

    def __getitem__(self, key: int | str) -> Decl:
        return self.items[key] if isinstance(key, (int, np.integer)) else self.items[self.index[key]]

    def free_name(self, base: str, bare_first: bool = False) -> str:
        """The first undeclared name of ``base0``, ``base1``, ... (with ``bare_first``:
        ``base`` itself, then ``base1``, ...): how passes name the buffers they generate."""
        if bare_first and base not in self:
            return base
        k = 1 if bare_first else 0
        while f"{base}{k}" in self:
            k += 1
        return f"{base}{k}"

    def __contains__(self, name: str) -> bool:
        return name in self.index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Decls) and self.items == other.items

    def of_kind(self, *kinds: str) -> list[Decl]:
        return [d for d in self.items if d.kind in kinds]

    def ref(self, name: str, kinds: tuple[str, ...]) -> int:
        """Index of ``name``, which must be declared as one of ``kinds``."""
        i = self.index.get(name)
        if i is None:
            raise ValueError(f"undeclared name '{name}'")
        if self.items[i].kind not in kinds:
            raise ValueError(f"'{name}' is a {self.items[i].kind}, expected {' or '.join(kinds)}")
        return i

    def resource_of(self, name: str) -> str:
        """Resource name behind ``name`` (a resource or a ``heap[slot]`` view)."""
        d = self.items[self.ref(name, ("buffer", "texture", "target", "depth", "view"))]
        if isinstance(d, View):
            if d.resource is None:
                raise ValueError(f"view '{name}' has no resource")
            return d.resource
        return d.name

    def add(self, d: Decl) -> int:
        """Append declaration ``d`` after checking its references; return its index."""
        if d.name in self.index:
            raise ValueError(f"'{d.name}' is already declared")
        if isinstance(d, View):
            heap = self[self.ref(d.heap, ("heap",))]
            if not (0 <= d.slot < heap.size):
                raise ValueError(f"slot {d.slot} is outside heap '{d.heap}' of size {heap.size}")
            if d.view not in VIEW_KINDS:
                raise ValueError(f"view kind must be one of {', '.join(VIEW_KINDS)}")
            if (d.view == "sampler") != (heap.type == "SAMPLER"):
                raise ValueError(f"a {d.view} view cannot live in a {heap.type} heap")
            if d.view == "sampler":
                if d.resource is not None:
                    raise ValueError("a sampler view has no resource")
            else:
                if d.resource is None:
                    raise ValueError(f"a {d.view} view needs a resource")
                kinds = ("buffer",) if d.view == "cbv" else ("buffer", "texture", "target", "depth")
                self.ref(d.resource, kinds)
        elif isinstance(d, Pipeline):
            if d.root is not None:
                rs = self[self.ref(d.root, ("rootsig",))]
                for p in d.params or ():
                    if not (0 <= p < len(rs.params)):
                        raise ValueError(f"pipeline '{d.name}': root parameter {p} not in '{d.root}'")
            elif d.params:
                raise ValueError(f"pipeline '{d.name}': params= needs root=")
            for r in (*d.reads, *d.writes):
                self.resource_of(r)
            check_contract(d, self[d.root] if d.root is not None else None)
        self.index[d.name] = len(self.items)
        self.items.append(d)
        return len(self.items) - 1

    def copy(self) -> Decls:
        """A shallow copy (declarations are shared; buffers' data arrays too)."""
        out = Decls()
        out.items = list(self.items)
        out.index = dict(self.index)
        return out

    def replace(self, d: Decl) -> None:
        """Replace the declaration of the same name (e.g. a buffer gaining data)."""
        self.items[self.index[d.name]] = d


def decl_to_json(d: Decl) -> dict[str, Any]:
    """A JSON-able dict of ``d`` (``kind`` first; defaults omitted)."""
    out: dict[str, Any] = {"kind": d.kind}
    for f in fields(d):
        v = getattr(d, f.name)
        if f.name == "data":
            if v is not None:
                out["data"] = [int(x) for x in v]
            continue
        if f.name != "name" and v == _default(f):
            continue
        if isinstance(v, tuple):
            v = [str(x) if isinstance(x, RootParam) else x for x in v]
        if f.name == "contract":
            if not v:
                continue
            v = format_contract(v)
        out[f.name] = v
    return out


def _default(f: Any) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def decl_from_json(obj: dict[str, Any]) -> Decl:
    """Inverse of :func:`decl_to_json`; raises ``ValueError`` on bad input."""
    if not isinstance(obj, dict) or obj.get("kind") not in DECL_TYPES:
        raise ValueError("declaration needs a known 'kind'")
    cls = DECL_TYPES[obj["kind"]]
    names = {f.name: f for f in fields(cls)}
    kw: dict[str, Any] = {}
    for k, v in obj.items():
        if k == "kind":
            continue
        if k not in names:
            raise ValueError(f"{obj['kind']}: unknown field {k!r}")
        if k == "params" and cls is RootSig:
            if not isinstance(v, list) or not all(isinstance(p, str) for p in v):
                raise ValueError("rootsig params must be a list of strings")
            v = tuple(RootParam.parse(p) for p in v)
        elif k == "data":
            if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
                raise ValueError("buffer data must be a list of integers")
            v = np.array(v, dtype=np.int64)
        elif isinstance(v, list):
            v = tuple(v)
        kw[k] = v
    _check_field_types(cls, kw)
    try:
        return cls(**kw)
    except TypeError as e:
        raise ValueError(f"{obj['kind']}: {e}") from None


def _check_field_types(cls: type, kw: dict[str, Any]) -> None:
    """Reject JSON values of the wrong type before the dataclass sees them."""
    ints = {"size", "width", "height", "slot", "gs_maxverts", "gs_vertsize", "gs_instances", "gs_invertsize"}
    strs = {"name", "format", "type", "heap", "view", "resource", "layout", "blend", "depth", "topology",
            "root", "uav_stage", "contract", *SHADER_STAGES}
    for k, v in kw.items():
        if k in ints and (not isinstance(v, int) or isinstance(v, bool)):
            raise ValueError(f"{cls.kind}.{k} must be an integer")
        if k in strs and v is not None and not isinstance(v, str):
            raise ValueError(f"{cls.kind}.{k} must be a string")
        if k in ("cpu", "frontend") and not isinstance(v, bool):
            raise ValueError(f"buffer.{k} must be true or false")
        if k == "gs_ratio" and (not isinstance(v, (int, float)) or isinstance(v, bool)):
            raise ValueError("pipeline.gs_ratio must be a number")
        if k in ("params", "reads", "writes") and cls is Pipeline and v is not None:
            want = int if k == "params" else str
            if not isinstance(v, tuple) or not all(isinstance(x, want) and not isinstance(x, bool) for x in v):
                raise ValueError(f"pipeline.{k} must be a list of {'integers' if want is int else 'strings'}")
