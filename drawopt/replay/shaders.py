"""GLSL generated per pipeline: what a draw's shaders can observe becomes colour and position.

Every graphics pipeline gets a vertex shader that derives, per vertex, the
*effective values* of drawopt's model (SPEC, "What a rewrite must preserve"):

``fetch``  the resolved vertex: index + BaseVertexLocation for indexed draws,
           StartVertexLocation + i for non-indexed ones (``gl_VertexID`` in GL);
``base``   BaseVertexLocation of an indexed draw (``gl_BaseVertexARB``), else 0;
           so the D3D ``SV_VertexID`` of an indexed draw is ``fetch - base``
           (= ``gl_VertexID - gl_BaseVertexARB``);
``inst``   the absolute instance, StartInstanceLocation + SV_InstanceID
           (``gl_BaseInstanceARB + gl_InstanceID``), what per-instance data sees;
``state``  a hash of every root argument the pipeline reads (computed on the CPU);
``lifted`` the values a rewrite contract may move into a per-draw array.

Under a ``x(vertex_bits=K, perdraw=P, lift=...)`` contract a DrawIndexedX is
decoded as the seed describes: ``id = SV_VertexID`` (index + IndexOffset, passed to
GL as basevertex, so ``gl_VertexID``), ``slot = id >> K``, ``v = id & (2^K - 1)``,
record ``perdraw[slot]`` = ``[base_vertex, start_instance, lifted...]``;
``fetch = base_vertex + v`` (``base=none``, the default) or ``v`` (``base=vertex``:
the base is already in IndexOffset's low bits).

The vertex reads the global vertex pool at ``a`` (``fetch`` for vertex pulling;
for input layouts the integer attributes of slots 0 and 1, plus ``fetch`` when
slot 0 is per-instance) and places it in a cell of a serpentine grid
(8 consecutive addresses per cell, shifted by a hash of ``inst``), so consecutive
vertices form small triangles. Colour (smoothly interpolated, alpha in
[0.25, 0.9]) and depth hash the pipeline, state, lifted values, base, instance
and ``a``: a wrong index offset, base vertex, instance, constant or draw order
changes pixels.
"""

from __future__ import annotations

__all__ = ["ProgramKey", "vertex_shader", "fragment_shader", "geometry_shader", "tess_shaders",
           "COPY_CS", "LIFT_MAX", "prim_class", "lift_sources", "lift_layout"]

from dataclasses import dataclass

from drawopt.ir.decls import Pipeline, lift_items
from drawopt.replay.gl import GL

LIFT_MAX = 16
"""At most this many lifted values per contract."""

_HASH = """
uint hash(uint x) {
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return x;
}
"""

_GS_IN = {"points": (1, "points"), "lines": (2, "lines"), "lines_adjacency": (4, "lines_adjacency"),
          "triangles": (3, "triangles"), "triangles_adjacency": (6, "triangles_adjacency")}
_GS_OUT = {"points": ("points", 1), "lines": ("line_strip", 2), "lines_adjacency": ("line_strip", 2),
           "triangles": ("triangle_strip", 3), "triangles_adjacency": ("triangle_strip", 3)}
_PASS_VERTS = {"lines_adjacency": (1, 2), "triangles_adjacency": (0, 2, 4)}


def prim_class(mode: int) -> str:
    """The geometry-shader input class of GL primitive ``mode``."""
    return {GL.POINTS: "points", GL.LINES: "lines", GL.LINE_STRIP: "lines",
            GL.LINES_ADJACENCY: "lines_adjacency", GL.LINE_STRIP_ADJACENCY: "lines_adjacency",
            GL.TRIANGLES: "triangles", GL.TRIANGLE_STRIP: "triangles",
            GL.TRIANGLES_ADJACENCY: "triangles_adjacency", GL.TRIANGLE_STRIP_ADJACENCY: "triangles_adjacency",
            GL.PATCHES: "patches"}[mode]


@dataclass(frozen=True)
class ProgramKey:
    """What one GL program is specialised for."""

    pipeline: str
    mode: str  # "direct" or "x"
    prim: str  # prim_class of the draw (GS input), or "patches"
    patch_vertices: int = 0


def lift_sources(text: str) -> list[tuple[int, int]]:
    """``lift=A+B``: each item ``P`` or ``P.k`` -> (param, word), read by the format's grammar
    (:func:`drawopt.ir.decls.lift_items`; the list was checked against the root signature when
    the stream was loaded). ValueError on a malformed list or more than :data:`LIFT_MAX` items."""
    out = list(lift_items(text))
    if len(out) > LIFT_MAX:
        raise ValueError(f"at most {LIFT_MAX} lifted values")
    return out


def lift_layout(p: Pipeline) -> tuple[list[tuple[int, int]], dict[str, list[tuple[int, int]]]]:
    """The union of the lift items of ``p``'s per-draw clauses (``x`` first, where the pipeline
    pulls its vertices, then the array clause) and each clause's own items (record order).

    What the shader observes is the union, however delivered: an item the clause a draw
    reads through lifts comes from its record, any other from the root arguments
    (docs/architecture.md, "Rewrite contracts"). Raises ValueError on a bad item."""
    own: dict[str, list[tuple[int, int]]] = {}
    x, ac = p.contract.x, p.contract.array
    for c in (x if p.vertex_pulling or ac is None else None, ac):
        if c is not None:
            own[c.name] = lift_sources(c.lift_text)
    union = list(dict.fromkeys(it for items in own.values() for it in items))
    if len(union) > LIFT_MAX:
        raise ValueError(f"at most {LIFT_MAX} lifted values")
    return union, own


def _contract_consts(p: Pipeline) -> dict[str, int]:
    out: dict[str, int] = {}
    x = p.contract.x
    if x is not None:
        out["XK"] = x.vertex_bits
        out["XSTRIDE"] = x.record_words
        out["XBASE_IN_OFFSET"] = int(x.base == "vertex")
    ac = p.contract.array
    if ac is not None:
        out["ASTRIDE"] = ac.record_words
    return out


def _maps(p: Pipeline, nlift: int) -> list[str]:
    """GLSL constants ``XMAP`` / ``AMAP``: for each union lift item, its word in the x / array
    record after the two leading words (-1: read from ``u_lift``, the root arguments)."""
    try:
        union, own = lift_layout(p)
    except ValueError:
        union, own = [], {}
    out = []
    ac = p.contract.array
    for name, clause in (("XMAP", "x"), ("AMAP", ac.name if ac is not None else None)):
        items = own.get(clause, []) if clause else []
        vals = [items.index(it) if it in items else -1 for it in union][:nlift]
        vals += [-1] * (max(nlift, 1) - len(vals))
        out.append(f"const int {name}[NLIFT] = int[NLIFT]({', '.join(str(v) for v in vals)});")
    return out


def vertex_shader(p: Pipeline, key: ProgramKey, pipe_hash: int, nlift: int, slot0_instance: bool,
                  draw_parameters: bool, out_name: str) -> str:
    """The vertex shader of pipeline ``p`` for ``key`` (see the module docstring)."""
    c = _contract_consts(p)
    defs = [f"#define NLIFT {max(nlift, 1)}", f"#define HAS_LIFT {int(nlift > 0)}",
            f"#define PIPE 0x{pipe_hash:08x}u", f"#define MODE_X {int(key.mode == 'x')}",
            f"#define LAYOUT {int(not p.vertex_pulling)}", f"#define SLOT0_INSTANCE {int(slot0_instance)}",
            f"#define HAS_X {int('XK' in c)}", f"#define HAS_ARRAY {int('ASTRIDE' in c)}",
            # an array clause on an input-layout pipeline: the record index is the only
            # StartInstanceLocation-dependent input (the id stream), so no instance-rate attribute is read
            f"#define IDSTREAM {int(not p.vertex_pulling and 'ASTRIDE' in c)}"]
    for k, v in c.items():
        defs.append(f"#define {k} {v}u")
    if "XK" in c:
        defs.append(f"#define XMASK 0x{(1 << c['XK']) - 1:08x}u")
    maps = "\n".join(_maps(p, nlift))
    ext = "#extension GL_ARB_shader_draw_parameters : require\n" if draw_parameters else ""
    params = ("#define BASE_VERTEX gl_BaseVertexARB\n#define BASE_INSTANCE gl_BaseInstanceARB\n"
              "#define DRAW_ID gl_DrawIDARB\n") if draw_parameters else (
              "uniform int u_base_vertex;\nuniform int u_base_instance;\nuniform int u_draw_id;\n"
              "#define BASE_VERTEX u_base_vertex\n#define BASE_INSTANCE u_base_instance\n"
              "#define DRAW_ID u_draw_id\n")
    return f"""#version 430 core
{ext}{chr(10).join(defs)}
{maps}
{params}
layout(std430, binding = 0) readonly buffer Pool {{ uvec2 pool[]; }};
layout(std430, binding = 1) readonly buffer PerDraw {{ uint perdraw[]; }};
uniform uint u_state;
uniform uint u_indexed;
uniform uint u_array;
uniform uint u_pd_off;
uniform uint u_lift[NLIFT];
uniform uvec4 u_grid;
uniform vec2 u_cell;
uniform vec2 u_decl;
#if LAYOUT
layout(location = 0) in uvec4 a_attr0;
layout(location = 1) in uvec4 a_attr1;
#endif
out vec4 {out_name};
{_HASH}
bool sane(uint w) {{
    // a float of magnitude 2^-10 .. 2^17 (or +0): decided on the bits, never on a value the
    // hardware may have flushed (denormals) or rounded
    uint e = (w >> 23) & 0xffu;
    return w == 0u || (e >= 117u && e < 144u);
}}
void main() {{
    uint fetch, base, inst;
    uint lk = 0x9e3779b9u;
#if MODE_X
    uint id = uint(gl_VertexID);
  #if HAS_X
    uint slot = id >> XK;
    uint v = id & XMASK;
    uint r = u_pd_off + slot * XSTRIDE;
    base = perdraw[r];
    inst = perdraw[r + 1u] + uint(gl_InstanceID);
    fetch = XBASE_IN_OFFSET != 0u ? v : base + v;
    #if HAS_LIFT
    for (int j = 0; j < NLIFT; ++j) lk = hash(lk ^ (XMAP[j] >= 0 ? perdraw[r + 2u + uint(XMAP[j])] : u_lift[j]));
    #endif
  #else
    fetch = id; base = 0u; inst = uint(gl_InstanceID);
  #endif
#else
    fetch = uint(gl_VertexID);
    base = u_indexed != 0u ? uint(BASE_VERTEX) : 0u;
    inst = uint(BASE_INSTANCE + gl_InstanceID);
  #if HAS_ARRAY
    if (u_array != 0u) {{
        // record StartInstanceLocation + instance: base vertex, instance seen, lift items
        uint r = u_pd_off + inst * ASTRIDE;
        if (u_indexed != 0u) {{ fetch = fetch - base + perdraw[r]; base = perdraw[r]; }}
        inst = perdraw[r + 1u];
      #if HAS_LIFT
        for (int j = 0; j < NLIFT; ++j) lk = hash(lk ^ (AMAP[j] >= 0 ? perdraw[r + 2u + uint(AMAP[j])] : u_lift[j]));
      #endif
    }} else
  #endif
    {{
  #if HAS_LIFT
        for (int j = 0; j < NLIFT; ++j) lk = hash(lk ^ u_lift[j]);
  #endif
    }}
#endif
    uint key = hash(PIPE ^ hash(u_state ^ hash(lk)) ^ hash(base * 0x9e3779b1u + 0x68bc21ebu)
                    ^ hash(inst * 0x85ebca77u + 0x2c1b3c6du));
    uint a;
    vec2 pos;
    bool placed = false;
#if LAYOUT
  #if IDSTREAM
    uvec4 w0 = SLOT0_INSTANCE != 0 ? uvec4(0u) : a_attr0;
    uvec4 w1 = uvec4(0u);
  #else
    uvec4 w0 = a_attr0;
    uvec4 w1 = a_attr1;
  #endif
    uint wh = hash(w0.x ^ hash(w0.y ^ hash(w0.z ^ hash(w0.w ^ hash(w1.x ^ hash(w1.y ^ 0x1b873593u))))));
    vec4 f = uintBitsToFloat(w0);
    // (under IDSTREAM a per-instance slot 0 is not read: nothing to place by)
    if ((IDSTREAM == 0 || SLOT0_INSTANCE == 0) && sane(w0.x) && sane(w0.y) &&
        (SLOT0_INSTANCE == 0 || (sane(w0.z) && sane(w0.w)))) {{
        // the attributes look like pixel positions (x, y[, width, height]) of the declared target
        vec2 px = f.xy;
        if (SLOT0_INSTANCE != 0) px += vec2(float(fetch & 1u), float((fetch >> 1) & 1u)) * f.zw;
        pos = vec2(px.x / u_decl.x * 2.0 - 1.0, 1.0 - px.y / u_decl.y * 2.0);
        a = wh;
        placed = true;
    }} else {{
        a = w0.x + w1.x + (SLOT0_INSTANCE != 0 ? fetch : 0u);
    }}
    key = hash(key ^ wh);
#else
    a = fetch;
#endif
    uvec2 p = pool[a & u_grid.w];
    if (!placed) {{
        uint shift = inst == 0u ? 0u : hash(inst);
        uint g = ((a >> 3) + shift) % u_grid.z;
        uint cy = g / u_grid.x;
        uint cx = g - cy * u_grid.x;
        if ((cy & 1u) != 0u) cx = u_grid.x - 1u - cx;
        vec2 jit = unpackUnorm2x16(p.x);
        pos = vec2(-1.0) + (vec2(float(cx), float(cy)) + jit * 1.5) * u_cell;
    }}
    float z = 0.05 + 0.9 * float(hash(key ^ p.y) >> 16) / 65536.0;
    gl_Position = vec4(pos, z * 2.0 - 1.0, 1.0);
    vec4 col = unpackUnorm4x8(hash(key ^ p.y));
    col.a = 0.25 + 0.65 * col.a;
    {out_name} = col;
}}
"""


def fragment_shader(in_name: str, outputs: int = 8) -> str:
    """Writes the interpolated colour (channel-rotated per render target) to every output."""
    swz = ("rgba", "gbra", "brga", "rbga", "grba", "bgra", "argb", "agbr")
    decl = "\n".join(f"layout(location = {i}) out vec4 o{i};" for i in range(outputs))
    body = "\n".join(f"    o{i} = c.{swz[i]};" for i in range(outputs))
    return f"""#version 430 core
in vec4 {in_name};
{decl}
void main() {{
    vec4 c = {in_name};
{body}
}}
"""


def geometry_shader(prim: str, in_name: str, out_name: str, instances: int = 1) -> str:
    """A pass-through geometry shader for input class ``prim`` (adjacency vertices dropped)."""
    n, in_layout = _GS_IN[prim]
    out_layout, nout = _GS_OUT[prim]
    verts = _PASS_VERTS.get(prim, tuple(range(nout)))
    emit = "\n".join(f"    gl_Position = gl_in[{v}].gl_Position; {out_name} = {in_name}[{v}]; EmitVertex();"
                     for v in verts)
    inst = max(1, min(int(instances), 32))
    return f"""#version 430 core
layout({in_layout}, invocations = 1) in;
layout({out_layout}, max_vertices = {len(verts) * inst}) out;
in vec4 {in_name}[];
out vec4 {out_name};
void main() {{
    for (int k = 0; k < {inst}; ++k) {{
{emit}
        EndPrimitive();
    }}
}}
"""


def tess_shaders(patch_vertices: int, in_name: str, out_name: str) -> tuple[str, str]:
    """Pass-through tessellation (level 1) for patches of 3 (triangles) or 4 (quads) points."""
    n = 4 if patch_vertices == 4 else 3
    tcs = f"""#version 430 core
layout(vertices = {n}) out;
in vec4 {in_name}[];
out vec4 tc_color[];
void main() {{
    gl_out[gl_InvocationID].gl_Position = gl_in[gl_InvocationID].gl_Position;
    tc_color[gl_InvocationID] = {in_name}[gl_InvocationID];
    if (gl_InvocationID == 0) {{
        gl_TessLevelOuter[0] = 1.0; gl_TessLevelOuter[1] = 1.0;
        gl_TessLevelOuter[2] = 1.0; gl_TessLevelOuter[3] = 1.0;
        gl_TessLevelInner[0] = 1.0; gl_TessLevelInner[1] = 1.0;
    }}
}}
"""
    if n == 3:
        body = ("    vec3 b = gl_TessCoord;\n"
                "    gl_Position = b.x * gl_in[0].gl_Position + b.y * gl_in[1].gl_Position"
                " + b.z * gl_in[2].gl_Position;\n"
                f"    {out_name} = b.x * tc_color[0] + b.y * tc_color[1] + b.z * tc_color[2];\n")
        dom = "triangles"
    else:
        body = ("    vec2 t = gl_TessCoord.xy;\n"
                "    gl_Position = mix(mix(gl_in[0].gl_Position, gl_in[1].gl_Position, t.x),"
                " mix(gl_in[3].gl_Position, gl_in[2].gl_Position, t.x), t.y);\n"
                f"    {out_name} = mix(mix(tc_color[0], tc_color[1], t.x), mix(tc_color[3], tc_color[2], t.x), t.y);\n")
        dom = "quads"
    tes = f"""#version 430 core
layout({dom}, equal_spacing, ccw) in;
in vec4 tc_color[];
out vec4 {out_name};
void main() {{
{body}}}
"""
    return tcs, tes


COPY_CS = """#version 430 core
layout(local_size_x = 64) in;
layout(std430, binding = 2) writeonly buffer Dst { uint dst[]; };
layout(std430, binding = 3) readonly buffer Src { uint src[]; };
uniform uint u_src_off;
uniform uint u_dst_off;
uniform uint u_n;
void main() {
    uint i = gl_GlobalInvocationID.y * 4194240u + gl_GlobalInvocationID.x;
    if (i < u_n) dst[u_dst_off + i] = src[u_src_off + i];
}
"""
"""The compute program a Dispatch runs: copies its precomputed output into each buffer it writes
(4194240 = 65535 groups x 64 invocations per row of the 2-D grid)."""
