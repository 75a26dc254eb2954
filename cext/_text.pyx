"""Per-line hot loops of the ``.dstream`` reader and of the text and JSON writers (``drawopt._text``).

The formats live in :mod:`drawopt.ir.formats.text` and :mod:`drawopt.ir.formats.jsonfmt`, which
build the tables these kernels run on from :data:`drawopt.ir.ops.OPS` (one description of every
command). The kernels only take the common case and hand every other line back to Python:

* :func:`text_scanner` reads the commands and ``data`` lines whose tokens have the canonical forms
  (decimal or ``0x`` integers, plain decimal floats, declared names, known keywords and flags). Any
  other line -- declarations, the header, ``Opaque``, non-ASCII text, unusual number forms, and every
  line with an error -- is returned to the Python reader, which handles it through the reference
  encoder and produces the exact error message. Accepting only a subset of what the reference
  accepts is what keeps the two identical. Its ``encode_json`` does the same for the JSON reader's
  command arrays.
* :func:`command_printer` prints the commands whose values all have a canonical token (a name in
  range, an enumerant in range); it stops at any other command (``Opaque`` among them) and the
  Python printer prints that one.
* :func:`format_words` prints ``data`` lines.

The pure-Python twins are ``drawopt.ir.formats.text._PureScanner``, the JSON reader's
:class:`~drawopt.ir.formats.common.Plan` loop, the Python printers in ``text.py`` / ``jsonfmt.py``
and ``text._data_lines_py``; the tests check that both give identical streams, bytes and errors.
"""

import numpy as np

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
from libc.math cimport fabs
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc, strtod
from libc.string cimport memchr, memcmp, memcpy, memset

__all__ = ["text_scanner", "command_printer", "format_words", "scan_json_array"]

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)

cdef enum:
    K_U32 = 0
    K_I32 = 1
    K_U64 = 2
    K_F32 = 3
    K_BOOL = 4
    K_ENUM = 5
    K_REF = 6
    K_HEAPREF = 7
    K_OTHER = 8
    MAX_TOKENS = 96
    CACHE_LEN = 40
    MAX_ENUM = 512

_KINDS = {"u32": K_U32, "i32": K_I32, "u64": K_U64, "f32": K_F32, "bool": K_BOOL, "enum": K_ENUM,
          "ref": K_REF, "heapref": K_HEAPREF}

cdef double F32_MAX = 3.4028234663852886e38
cdef int64_t U32_MAX = 4294967295
cdef uint64_t I64_MAX = 9223372036854775807
cdef int64_t I32_MIN = -2147483648
cdef int64_t I32_MAX = 2147483647
cdef uint8_t WS[256]
memset(WS, 0, 256)
for _c in (9, 10, 11, 12, 13, 28, 29, 30, 31, 32):  # what str.split() splits on, in ASCII
    WS[_c] = 1


# ============================================================================ token forms
cdef inline int _parse_int(const uint8_t* s, Py_ssize_t l, int64_t* out) noexcept nogil:
    """0 and the value for ``-?[1-9][0-9]{0,17}``, ``0`` or ``0x`` with up to 16 hex digits (below
    2**63); 1 for anything else (``int(t, 0)`` decides those)."""
    cdef Py_ssize_t i = 0
    cdef uint64_t v = 0
    cdef int neg = 0
    cdef uint8_t c
    if l <= 0:
        return 1
    if l > 2 and s[0] == c'0' and (s[1] == c'x' or s[1] == c'X'):
        if l > 18:
            return 1
        for i in range(2, l):
            c = s[i]
            if c'0' <= c <= c'9':
                v = v * 16 + (c - c'0')
            elif c'a' <= c <= c'f':
                v = v * 16 + (c - c'a' + 10)
            elif c'A' <= c <= c'F':
                v = v * 16 + (c - c'A' + 10)
            else:
                return 1
        if v > I64_MAX:
            return 1
        out[0] = <int64_t>v
        return 0
    if s[0] == c'-':
        neg = 1
        i = 1
    if l - i < 1 or l - i > 18 or (s[i] == c'0' and l - i > 1):
        return 1
    while i < l:
        c = s[i]
        if c < c'0' or c > c'9':
            return 1
        v = v * 10 + (c - c'0')
        i += 1
    out[0] = -<int64_t>v if neg else <int64_t>v
    return 0


cdef inline int _parse_f32(const uint8_t* s, Py_ssize_t l, int64_t* out) noexcept nogil:
    """0 and the float32 bits for ``0x`` bits or ``-?D+(.D*)?([eE][+-]?D+)?`` within float32 range;
    1 for anything else."""
    cdef Py_ssize_t i = 0
    cdef int64_t bits
    cdef char tmp[64]
    cdef char* end
    cdef double d
    cdef float f
    cdef uint32_t fb
    if l > 2 and s[0] == c'0' and (s[1] == c'x' or s[1] == c'X'):
        if _parse_int(s, l, &bits) or bits > U32_MAX:
            return 1
        out[0] = bits
        return 0
    if l <= 0 or l >= 64:
        return 1
    if s[0] == c'-':
        i = 1
    if i >= l or not (c'0' <= s[i] <= c'9'):
        return 1
    while i < l and c'0' <= s[i] <= c'9':
        i += 1
    if i < l and s[i] == c'.':
        i += 1
        while i < l and c'0' <= s[i] <= c'9':
            i += 1
    if i < l and (s[i] == c'e' or s[i] == c'E'):
        i += 1
        if i < l and (s[i] == c'+' or s[i] == c'-'):
            i += 1
        if i >= l or not (c'0' <= s[i] <= c'9'):
            return 1
        while i < l and c'0' <= s[i] <= c'9':
            i += 1
    if i != l:
        return 1
    memcpy(tmp, s, l)
    tmp[l] = 0
    d = strtod(tmp, &end)
    if end != tmp + l or not (fabs(d) <= F32_MAX):
        return 1
    f = <float>d
    memcpy(&fb, &f, 4)
    out[0] = fb
    return 0


cdef inline int _parse_bool(const uint8_t* s, Py_ssize_t l, int64_t* out) noexcept nogil:
    if (l == 4 and (memcmp(s, b"TRUE", 4) == 0 or memcmp(s, b"true", 4) == 0)) or (l == 1 and s[0] == c'1'):
        out[0] = 1
        return 0
    if (l == 5 and (memcmp(s, b"FALSE", 5) == 0 or memcmp(s, b"false", 5) == 0)) or (l == 1 and s[0] == c'0'):
        out[0] = 0
        return 0
    return 1


# ============================================================================ reader
cdef struct ArgSpec:
    int kind
    int col
    uint32_t refmask
    int enum_first
    int enum_count
    int key_off
    int key_len
    int cache_len
    uint8_t cache[CACHE_LEN]
    int64_t cache_index
    int64_t cache_size
    uint32_t cache_bit


cdef struct OpSpec:
    int code
    int usable
    int name_off
    int name_len
    int nslots
    int nreq
    int slots[6]
    int nkw
    int kws[6]
    int has_var
    int var_min
    int var_max
    ArgSpec args[6]
    ArgSpec var
    int64_t dflt[6]


cdef class _TextScanner:
    """Reads the lines of a ``.dstream`` text (UTF-8 ``bytes``) into command columns.

    ``scan()`` consumes lines until one needs the Python reader and returns ``(lineno, text)`` of
    it (``None`` at the end); the reader handles that line -- ``add`` appends a command it
    encoded, ``declared`` makes a new declaration known, ``data_add`` appends buffer words -- and
    calls ``scan()`` again. Until ``ready`` is set (the header was read) every non-blank line goes
    to Python. ``finish()`` returns the columns.

    ``ops``: per command ``(code, name, nreq, slot_cols, kw_cols, args, var, var_min, var_max,
    defaults)`` with ``args`` per column and ``var`` ``(kind, refmask, enum_values, keyword)``
    (``var`` None without a variadic tail); ``flags``: ``(name, bit)`` pairs; ``buffer_bit``:
    the kind bit of buffers (``data`` lines).
    """

    cdef bytes data
    cdef const uint8_t* buf
    cdef Py_ssize_t n
    cdef Py_ssize_t pos
    cdef Py_ssize_t lineno
    cdef public bint ready
    cdef dict names
    cdef bytes blob
    cdef const uint8_t* blob_p
    cdef OpSpec* ops
    cdef int nops
    cdef int by_len[64][8]
    cdef int by_len_n[64]
    cdef int nflags
    cdef int flag_off[8]
    cdef int flag_len[8]
    cdef int flag_bit[8]
    cdef int enum_off[MAX_ENUM]
    cdef int enum_len[MAX_ENUM]
    cdef uint32_t buffer_bit
    cdef ArgSpec data_arg
    # columns
    cdef object a_op, a_args, a_var_len, a_flags, a_line, a_pool, a_words, a_wdecl, a_have
    cdef uint16_t[::1] v_op
    cdef int64_t[:, ::1] v_args
    cdef int32_t[::1] v_var_len
    cdef uint8_t[::1] v_flags
    cdef int32_t[::1] v_line
    cdef int64_t[::1] v_pool
    cdef uint32_t[::1] v_words
    cdef int32_t[::1] v_wdecl
    cdef int64_t[::1] v_have
    cdef Py_ssize_t ncmd, cap, npool, pool_cap, nwords, words_cap
    # tokens of the current line
    cdef Py_ssize_t tok_s[MAX_TOKENS]
    cdef Py_ssize_t tok_l[MAX_TOKENS]

    def __cinit__(self):
        self.ops = NULL

    def __dealloc__(self):
        free(self.ops)

    def __init__(self, bytes data, list ops, list flags, uint32_t buffer_bit, Py_ssize_t capacity=-1):
        cdef Py_ssize_t nlines
        self.data = data
        self.buf = <const uint8_t*>PyBytes_AS_STRING(data)
        self.n = PyBytes_GET_SIZE(data)
        self.pos = 0
        self.lineno = 1
        self.ready = False
        self.names = {}
        self.buffer_bit = buffer_bit
        blob = bytearray()

        def put(bytes b):
            off = len(blob)
            blob.extend(b)
            return off

        cdef OpSpec* op
        self.nops = len(ops)
        self.ops = <OpSpec*>malloc(sizeof(OpSpec) * max(self.nops, 1))
        if self.ops == NULL:
            raise MemoryError
        memset(self.ops, 0, sizeof(OpSpec) * max(self.nops, 1))
        memset(self.by_len_n, 0, sizeof(self.by_len_n))
        enum_spans = []
        for k, (code, name, nreq, slot_cols, kw_cols, args, var, var_min, var_max, dflt) in enumerate(ops):
            op = &self.ops[k]
            op.code = code
            op.name_off = put(name)
            op.name_len = len(name)
            op.usable = 1
            op.nslots = len(slot_cols)
            op.nreq = nreq
            for i, c in enumerate(slot_cols):
                op.slots[i] = c
            op.nkw = len(kw_cols)
            for i, c in enumerate(kw_cols):
                op.kws[i] = c
            for j in range(6):
                op.dflt[j] = dflt[j]
            for j, a in enumerate(args):
                if not _fill_arg(&op.args[j], j, a, put, enum_spans):
                    op.usable = 0
            op.has_var = var is not None
            op.var_min = var_min
            op.var_max = var_max
            if var is not None and not _fill_arg(&op.var, -1, var, put, enum_spans):
                op.usable = 0
            if not (0 < op.name_len < 64 and self.by_len_n[op.name_len] < 8):
                raise ValueError(f"command name {name!r}: the name table holds 8 names of each length below 64")
            self.by_len[op.name_len][self.by_len_n[op.name_len]] = k
            self.by_len_n[op.name_len] += 1
        if len(enum_spans) > MAX_ENUM:
            raise ValueError("too many enumerants")
        for i, (off, ln) in enumerate(enum_spans):
            self.enum_off[i] = off
            self.enum_len[i] = ln
        if len(flags) > 8:
            raise ValueError("at most 8 flags")
        self.nflags = len(flags)
        for i in range(self.nflags):
            self.flag_off[i] = put(flags[i][0])
            self.flag_len[i] = len(flags[i][0])
            self.flag_bit[i] = flags[i][1]
        self.blob = bytes(blob)
        self.blob_p = <const uint8_t*>PyBytes_AS_STRING(self.blob)
        memset(&self.data_arg, 0, sizeof(ArgSpec))
        self.data_arg.kind = K_REF
        self.data_arg.refmask = buffer_bit
        self.data_arg.cache_len = -1
        nlines = data.count(b"\n") + 1 if capacity < 0 else capacity
        self.cap = nlines
        self.a_op = np.zeros(nlines, np.uint16)
        self.a_args = np.zeros((nlines, 6), np.int64)
        self.a_var_len = np.zeros(nlines, np.int32)
        self.a_flags = np.zeros(nlines, np.uint8)
        self.a_line = np.zeros(nlines, np.int32)
        self.v_op = self.a_op
        self.v_args = self.a_args
        self.v_var_len = self.a_var_len
        self.v_flags = self.a_flags
        self.v_line = self.a_line
        self.ncmd = 0
        self.npool = 0
        self.pool_cap = 0
        self.a_pool = np.zeros(0, np.int64)
        self.v_pool = self.a_pool
        self._grow_pool(max(1024, nlines))
        self.nwords = 0
        self.words_cap = 0
        self.a_words = np.zeros(0, np.uint32)
        self.a_wdecl = np.zeros(0, np.int32)
        self.v_words = self.a_words
        self.v_wdecl = self.a_wdecl
        self.a_have = np.zeros(0, np.int64)
        self.v_have = self.a_have

    # ------------------------------------------------------------------ storage
    cdef int _grow_pool(self, Py_ssize_t need) except -1:
        cdef Py_ssize_t cap = max(need, 2 * self.pool_cap)
        new = np.zeros(cap, np.int64)
        new[:self.npool] = self.a_pool[:self.npool]
        self.a_pool = new
        self.v_pool = new
        self.pool_cap = cap
        return 0

    cdef int _grow_words(self, Py_ssize_t need) except -1:
        cdef Py_ssize_t cap = max(need, 2 * self.words_cap, 1024)
        w = np.zeros(cap, np.uint32)
        d = np.zeros(cap, np.int32)
        w[:self.nwords] = self.a_words[:self.nwords]
        d[:self.nwords] = self.a_wdecl[:self.nwords]
        self.a_words, self.a_wdecl = w, d
        self.v_words, self.v_wdecl = w, d
        self.words_cap = cap
        return 0

    cdef int _grow_cmds(self) except -1:
        cap = 2 * self.cap + 16
        self.a_op = np.concatenate([self.a_op, np.zeros(cap - self.cap, np.uint16)])
        self.a_args = np.concatenate([self.a_args, np.zeros((cap - self.cap, 6), np.int64)])
        self.a_var_len = np.concatenate([self.a_var_len, np.zeros(cap - self.cap, np.int32)])
        self.a_flags = np.concatenate([self.a_flags, np.zeros(cap - self.cap, np.uint8)])
        self.a_line = np.concatenate([self.a_line, np.zeros(cap - self.cap, np.int32)])
        self.v_op = self.a_op
        self.v_args = self.a_args
        self.v_var_len = self.a_var_len
        self.v_flags = self.a_flags
        self.v_line = self.a_line
        self.cap = cap
        return 0

    def declared(self, bytes name, int64_t index, uint32_t kind_bit, int64_t size):
        """Make declaration ``name`` (global ``index``, kind bit, size in bytes or slots) known."""
        self.names[name] = (index, kind_bit, size)
        if index >= self.a_have.shape[0]:
            have = np.full(max(index + 1, 2 * self.a_have.shape[0]), -1, np.int64)
            have[:self.a_have.shape[0]] = self.a_have
            self.a_have = have
            self.v_have = have

    def add(self, int code, row, var, int flags, int32_t lineno):
        """Append a command the Python reader encoded."""
        cdef Py_ssize_t i, j, k = len(var)
        if self.ncmd >= self.cap:
            self._grow_cmds()
        if self.npool + k > self.pool_cap:
            self._grow_pool(self.npool + k)
        i = self.ncmd
        self.v_op[i] = code
        for j in range(6):
            self.v_args[i, j] = row[j]
        for j in range(k):
            self.v_pool[self.npool + j] = var[j]
        self.npool += k
        self.v_var_len[i] = k
        self.v_flags[i] = flags
        self.v_line[i] = lineno
        self.ncmd += 1

    def data_have(self, Py_ssize_t di):
        """Words buffer ``di`` has so far (0 if none)."""
        return max(self.v_have[di], 0) if 0 <= di < self.v_have.shape[0] else 0

    def data_add(self, Py_ssize_t di, words):
        """Append ``words`` to buffer ``di`` (which then has data, even if ``words`` is empty)."""
        cdef Py_ssize_t j, k = len(words)
        if self.nwords + k > self.words_cap:
            self._grow_words(self.nwords + k)
        for j in range(k):
            self.v_words[self.nwords + j] = words[j]
            self.v_wdecl[self.nwords + j] = di
        self.nwords += k
        self.v_have[di] = (self.v_have[di] if self.v_have[di] > 0 else 0) + k

    def finish(self):
        """``(op, args, var_off, var_len, pool, flags, line, data)``; ``data`` maps a buffer's
        declaration index to its words (``uint32``)."""
        n = self.ncmd
        cols = [self.a_op, self.a_args, self.a_var_len, self.a_flags, self.a_line]
        if n * 4 < self.cap * 3:  # many lines were not commands: do not keep the spare rows
            cols = [c[:n].copy() for c in cols]
        else:
            cols = [c[:n] for c in cols]
        op, args, var_len, flags, line = cols
        var_off = np.zeros(n, np.int64)
        if n:
            np.cumsum(var_len[:n - 1], out=var_off[1:])
        pool = self.a_pool[:self.npool].copy()
        data = {}
        have = self.a_have
        if (have >= 0).any():
            wd = self.a_wdecl[:self.nwords]
            order = np.argsort(wd, kind="stable")
            words = self.a_words[:self.nwords][order]
            sd = wd[order]
            for di in np.flatnonzero(have >= 0).tolist():
                a, b = np.searchsorted(sd, [di, di + 1])
                data[di] = words[a:b].copy()
        return op, args, var_off, var_len, pool, flags, line, data

    # ------------------------------------------------------------------ scanning
    def scan(self):
        """Consume lines up to the next one the Python reader must handle: ``(lineno, text)``, or
        ``None`` at the end of the text."""
        cdef const uint8_t* buf = self.buf
        cdef Py_ssize_t n = self.n, i, start, ts, ntok, lineno
        cdef const uint8_t* hit
        cdef uint8_t c
        cdef int nonascii, r
        while self.pos <= n:
            start = self.pos
            i = start
            ntok = 0
            nonascii = 0
            while i < n:
                c = buf[i]
                if c == c'\n':
                    break
                if c == c'#':
                    hit = <const uint8_t*>memchr(buf + i, c'\n', n - i)
                    i = n if hit == NULL else hit - buf
                    break
                if WS[c]:
                    i += 1
                    continue
                ts = i
                while i < n:
                    c = buf[i]
                    if WS[c] or c == c'#':
                        break
                    if c >= 0x80:
                        nonascii = 1
                    i += 1
                if ntok < MAX_TOKENS:
                    self.tok_s[ntok] = ts
                    self.tok_l[ntok] = i - ts
                ntok += 1
            lineno = self.lineno
            self.pos = i + 1
            self.lineno += 1
            if ntok == 0:
                continue
            if self.ready and not nonascii and ntok <= MAX_TOKENS:
                r = self._line(ntok, lineno)
                if r == 0:
                    continue
            return lineno, PyUnicode_DecodeUTF8(<char*>buf + start, i - start, "surrogatepass")
        return None

    cdef int _lookup(self, ArgSpec* a, const uint8_t* s, Py_ssize_t l, int64_t* index, uint32_t* bit,
                     int64_t* size) except -1:
        """0 and what ``names`` holds for ``s`` (through ``a``'s one-entry cache); 1 if undeclared."""
        cdef PyObject* item
        if a.cache_len == l and memcmp(a.cache, s, l) == 0:
            index[0] = a.cache_index
            bit[0] = a.cache_bit
            size[0] = a.cache_size
            return 0
        item = PyDict_GetItem(self.names, PyBytes_FromStringAndSize(<char*>s, l))
        if item == NULL:
            return 1
        t = <tuple><object>item
        index[0] = t[0]
        bit[0] = t[1]
        size[0] = t[2]
        if l <= CACHE_LEN:
            memcpy(a.cache, s, l)
            a.cache_len = l
            a.cache_index = index[0]
            a.cache_bit = bit[0]
            a.cache_size = size[0]
        return 0

    cdef int _value(self, ArgSpec* a, const uint8_t* s, Py_ssize_t l, int64_t* out) except -1:
        """0 and the stored value of token ``s`` for argument ``a``; 1: Python decides."""
        cdef int64_t v, index, size, slot
        cdef uint32_t bit
        cdef int k
        cdef Py_ssize_t b, i
        cdef const uint8_t* hit
        if a.kind == K_U32:
            if _parse_int(s, l, &v) or v < 0 or v > U32_MAX:
                return 1
        elif a.kind == K_REF:
            if self._lookup(a, s, l, &v, &bit, &size) or not (bit & a.refmask):
                return 1
        elif a.kind == K_HEAPREF:
            hit = <const uint8_t*>memchr(s, c'[', l)
            if hit == NULL or s[l - 1] != c']':
                return 1
            b = hit - s
            if l - b - 2 < 1 or l - b - 2 > 15:
                return 1
            slot = 0
            for i in range(b + 1, l - 1):
                if s[i] < c'0' or s[i] > c'9':
                    return 1
                slot = slot * 10 + (s[i] - c'0')
            if self._lookup(a, s, b, &index, &bit, &size) or not (bit & a.refmask) or slot >= size:
                return 1
            v = (index << 32) | slot
        elif a.kind == K_ENUM:
            for k in range(a.enum_count):
                if self.enum_len[a.enum_first + k] == l and \
                        memcmp(self.blob_p + self.enum_off[a.enum_first + k], s, l) == 0:
                    out[0] = k
                    return 0
            return 1
        elif a.kind == K_I32:
            if _parse_int(s, l, &v) or v < I32_MIN or v > I32_MAX:
                return 1
        elif a.kind == K_U64:
            if _parse_int(s, l, &v) or v < 0:
                return 1
        elif a.kind == K_F32:
            if _parse_f32(s, l, &v):
                return 1
        elif a.kind == K_BOOL:
            if _parse_bool(s, l, &v):
                return 1
        else:
            return 1
        out[0] = v
        return 0

    cdef int _find_op(self, const uint8_t* s, Py_ssize_t l) noexcept:
        cdef int k, m
        if l <= 0 or l >= 64:
            return -1
        for m in range(self.by_len_n[l]):
            k = self.by_len[l][m]
            if memcmp(self.blob_p + self.ops[k].name_off, s, l) == 0:
                return k
        return -1

    cdef OpSpec* _begin(self, const uint8_t* name, Py_ssize_t l, int64_t* row) except? NULL:
        """The command named ``name`` (NULL if none or not readable here), ``row`` set to its
        defaults and room made in the pool for its variadic values."""
        cdef int k = self._find_op(name, l), j
        cdef OpSpec* op
        if k < 0 or not self.ops[k].usable:
            return NULL
        op = &self.ops[k]
        if self.npool + op.var_max > self.pool_cap:
            self._grow_pool(self.npool + op.var_max)
        for j in range(6):
            row[j] = op.dflt[j]
        return op

    cdef int _flag(self, const uint8_t* s, Py_ssize_t l) noexcept:
        """The bit of flag ``s`` (0: unknown)."""
        cdef int m
        for m in range(self.nflags):
            if self.flag_len[m] == l and memcmp(self.blob_p + self.flag_off[m], s, l) == 0:
                return self.flag_bit[m]
        return 0

    cdef int _keyword(self, OpSpec* op, const uint8_t* s, Py_ssize_t l) noexcept:
        """Which of ``op``'s keyword arguments is named ``s`` (-1: none)."""
        cdef int m
        cdef ArgSpec* a
        for m in range(op.nkw):
            a = &op.args[op.kws[m]]
            if a.key_len == l and memcmp(self.blob_p + a.key_off, s, l) == 0:
                return m
        return -1

    cdef ArgSpec* _slot(self, OpSpec* op, Py_ssize_t npos, int64_t* row, int64_t** out) noexcept:
        """The argument positional value ``npos`` fills, and where its value goes (NULL: one too many)."""
        cdef ArgSpec* a
        if npos < op.nslots:
            a = &op.args[op.slots[npos]]
            out[0] = &row[a.col]
            return a
        if op.has_var and npos - op.nslots < op.var_max:
            out[0] = &self.v_pool[self.npool + npos - op.nslots]
            return &op.var
        return NULL

    cdef int _commit(self, OpSpec* op, const int64_t* row, Py_ssize_t npos, int fl, int32_t lineno) except -1:
        """Append the command if ``npos`` positional values are enough (0), else 1."""
        cdef Py_ssize_t i, nvar = npos - op.nslots if npos > op.nslots else 0
        cdef int j
        if npos < op.nreq or (op.has_var and nvar < op.var_min):
            return 1
        if self.ncmd >= self.cap:
            self._grow_cmds()
        i = self.ncmd
        self.v_op[i] = op.code
        for j in range(6):
            self.v_args[i, j] = row[j]
        self.v_var_len[i] = nvar
        self.v_flags[i] = fl
        self.v_line[i] = lineno
        self.npool += nvar
        self.ncmd += 1
        return 0

    cdef int _line(self, Py_ssize_t ntok, Py_ssize_t lineno) except -1:
        """Encode the tokenized line as a command (0), or leave it to Python (1)."""
        cdef const uint8_t* buf = self.buf
        cdef const uint8_t* s
        cdef const uint8_t* eq
        cdef Py_ssize_t l, t, e, npos = 0
        cdef int m, bit, fl = 0, kwseen = 0
        cdef int64_t row[6]
        cdef int64_t* out
        cdef OpSpec* op
        cdef ArgSpec* a
        op = self._begin(buf + self.tok_s[0], self.tok_l[0], row)
        if op == NULL:
            if self.tok_l[0] == 4 and memcmp(buf + self.tok_s[0], b"data", 4) == 0:
                return self._data(ntok)
            return 1
        for t in range(1, ntok):
            s = buf + self.tok_s[t]
            l = self.tok_l[t]
            if s[0] == c'@':
                bit = self._flag(s + 1, l - 1)
                if not bit:
                    return 1
                fl |= bit
                continue
            eq = <const uint8_t*>memchr(s, c'=', l)
            if eq != NULL:
                e = eq - s
                m = self._keyword(op, s, e)
                if m < 0 or kwseen & (1 << m):
                    return 1
                kwseen |= 1 << m
                a = &op.args[op.kws[m]]
                if self._value(a, s + e + 1, l - e - 1, &row[a.col]):
                    return 1
                continue
            a = self._slot(op, npos, row, &out)
            if a == NULL or self._value(a, s, l, out):
                return 1
            npos += 1
        return self._commit(op, row, npos, fl, <int32_t>lineno)

    cdef int _data(self, Py_ssize_t ntok) except -1:
        """``data BUFFER word...`` with canonical words that fit: 0; else 1."""
        cdef const uint8_t* buf = self.buf
        cdef int64_t di, size, have, v
        cdef uint32_t bit
        cdef Py_ssize_t t, k = ntok - 2
        if ntok < 2:
            return 1
        if self._lookup(&self.data_arg, buf + self.tok_s[1], self.tok_l[1], &di, &bit, &size) \
                or not (bit & self.buffer_bit) or di >= self.v_have.shape[0]:
            return 1
        have = self.v_have[di]
        if have < 0:
            have = 0
        if k > size // 4 - have:
            return 1
        if self.nwords + k > self.words_cap:
            self._grow_words(self.nwords + k)
        for t in range(k):
            if _parse_int(buf + self.tok_s[t + 2], self.tok_l[t + 2], &v) or v < 0 or v > U32_MAX:
                return 1
            self.v_words[self.nwords + t] = <uint32_t>v
            self.v_wdecl[self.nwords + t] = <int32_t>di
        self.nwords += k
        self.v_have[di] = have + k
        return 0

    # ------------------------------------------------------------------ JSON command arrays
    def encode_json(self, list raw, Py_ssize_t start):
        """Encode the JSON commands ``raw[start:]`` up to the first one the Python reader must
        handle; return its index (``len(raw)`` when all are done). Their ``line`` is 0."""
        cdef Py_ssize_t i, n = len(raw)
        for i in range(start, n):
            if self._element(raw[i]):
                return i
        return n

    cdef int _json_value(self, ArgSpec* a, object v, int64_t* out) except -1:
        """0 and the stored value of JSON value ``v`` for argument ``a``; 1: Python decides. A
        string is read as the text token it spells (``codec.encode`` treats both alike)."""
        cdef const char* s
        cdef Py_ssize_t l
        cdef int overflow = 0
        cdef int64_t x
        cdef double d
        cdef float f
        cdef uint32_t fb
        if type(v) is str:
            if not PyUnicode_IS_ASCII(v):
                return 1
            s = PyUnicode_AsUTF8AndSize(v, &l)
            return self._value(a, <const uint8_t*>s, l, out)
        if type(v) is int:
            x = PyLong_AsLongLongAndOverflow(v, &overflow)
            if overflow:
                return 1
            if a.kind == K_U32:
                if x < 0 or x > U32_MAX:
                    return 1
            elif a.kind == K_I32:
                if x < I32_MIN or x > I32_MAX:
                    return 1
            elif a.kind == K_U64:
                if x < 0:
                    return 1
            elif a.kind == K_F32:
                d = <double>x
                if not (fabs(d) <= F32_MAX):
                    return 1
                f = <float>d
                memcpy(&fb, &f, 4)
                x = fb
            elif a.kind == K_BOOL:
                if x != 0 and x != 1:
                    return 1
            else:
                return 1
            out[0] = x
            return 0
        if type(v) is float and a.kind == K_F32:
            d = PyFloat_AS_DOUBLE(v)
            if not (fabs(d) <= F32_MAX):
                return 1
            f = <float>d
            memcpy(&fb, &f, 4)
            out[0] = fb
            return 0
        if type(v) is bool and a.kind == K_BOOL:
            out[0] = 1 if v else 0
            return 0
        return 1

    cdef int _element(self, object el) except -1:
        """Encode one JSON command array (0), or leave it to Python (1)."""
        cdef Py_ssize_t m, t, l, npos = 0
        cdef const char* s
        cdef int q, bit, fl = 0, has_opts = 0
        cdef int64_t row[6]
        cdef int64_t* out
        cdef OpSpec* op
        cdef ArgSpec* a
        cdef list lst
        if type(el) is not list:
            return 1
        lst = <list>el
        m = len(lst)
        if m == 0 or type(lst[0]) is not str or not PyUnicode_IS_ASCII(lst[0]):
            return 1
        s = PyUnicode_AsUTF8AndSize(lst[0], &l)
        op = self._begin(<const uint8_t*>s, l, row)
        if op == NULL:
            return 1
        if m > 1 and type(lst[m - 1]) is dict:
            has_opts = 1
        for t in range(1, m - has_opts):
            a = self._slot(op, npos, row, &out)
            if a == NULL or self._json_value(a, lst[t], out):
                return 1
            npos += 1
        if has_opts:
            for key, v in (<dict>lst[m - 1]).items():
                if type(key) is not str or not PyUnicode_IS_ASCII(key):
                    return 1
                s = PyUnicode_AsUTF8AndSize(key, &l)
                if l == 5 and memcmp(s, b"flags", 5) == 0:
                    if type(v) is not list:
                        return 1
                    for f in <list>v:
                        if type(f) is not str or not PyUnicode_IS_ASCII(f):
                            return 1
                        s = PyUnicode_AsUTF8AndSize(f, &l)
                        bit = self._flag(<const uint8_t*>s, l)
                        if not bit:
                            return 1
                        fl |= bit
                    continue
                q = self._keyword(op, <const uint8_t*>s, l)
                if q < 0:
                    return 1
                a = &op.args[op.kws[q]]
                if self._json_value(a, v, &row[a.col]):
                    return 1
        return self._commit(op, row, npos, fl, 0)

cdef bint _fill_arg(ArgSpec* a, int col, tuple desc, put, list enum_spans) except -1:
    """Fill ``a`` from ``(kind, refmask, enum_values, keyword)``; False if the kind has no fast form."""
    kind, refmask, values, keyword = desc
    memset(a, 0, sizeof(ArgSpec))
    a.kind = _KINDS.get(kind, K_OTHER)
    a.col = col
    a.refmask = refmask
    a.cache_len = -1
    a.key_off = -1
    if keyword is not None:
        a.key_off = put(keyword)
        a.key_len = len(keyword)
    a.enum_first = len(enum_spans)
    a.enum_count = len(values)
    for v in values:
        enum_spans.append((put(v), len(v)))
    return a.kind != K_OTHER


# ============================================================================ writer
cdef struct Out:
    char* p
    Py_ssize_t n
    Py_ssize_t cap


cdef int _reserve(Out* o, Py_ssize_t k) except -1:
    cdef Py_ssize_t cap
    cdef char* p
    if o.n + k <= o.cap:
        return 0
    cap = max(2 * o.cap, o.n + k + 4096)
    p = <char*>realloc(o.p, cap)
    if p == NULL:
        raise MemoryError
    o.p = p
    o.cap = cap
    return 0


cdef inline int _put(Out* o, const char* s, Py_ssize_t k) except -1:
    if o.n + k > o.cap:
        _reserve(o, k)
    memcpy(o.p + o.n, s, k)
    o.n += k
    return 0


cdef inline int _put_int(Out* o, int64_t v, bint hex_big) except -1:
    """``str(v)``, or ``0x`` lowercase hex for ``v >= 0x10000`` with ``hex_big``."""
    cdef char tmp[24]
    cdef int i = 24
    cdef uint64_t u
    if o.n + 24 > o.cap:
        _reserve(o, 24)
    if hex_big and v >= 0x10000:
        u = <uint64_t>v
        while u:
            i -= 1
            tmp[i] = b"0123456789abcdef"[u & 15]
            u >>= 4
        i -= 2
        tmp[i] = c'0'
        tmp[i + 1] = c'x'
    else:
        u = (<uint64_t>0 - <uint64_t>v) if v < 0 else <uint64_t>v
        while True:
            i -= 1
            tmp[i] = c'0' + <char>(u % 10)
            u //= 10
            if u == 0:
                break
        if v < 0:
            i -= 1
            tmp[i] = c'-'
    memcpy(o.p + o.n, tmp + i, 24 - i)
    o.n += 24 - i
    return 0


cdef struct PArg:
    int kind
    int col
    int64_t dflt
    int hex_big
    int tok_first
    int tok_count
    int key_tok


cdef struct POp:
    int usable
    int head_tok
    int npos
    int pos[6]
    int nkw
    int kw[6]
    int has_var
    PArg args[6]
    PArg var


cdef class _CommandPrinter:
    """Prints commands as ``.dstream`` lines (``json=False``) or JSON command arrays.

    ``ops``: per opcode (a list indexed by opcode, None where no command) ``(head, positional,
    keywords, var)`` with ``head`` the printed name, ``positional``/``keywords`` lists of
    ``(col, kind, default, hex_big, enum_tokens, key_token)`` and ``var`` one such tuple or None;
    a None entry instead of the tuple means Python prints that command (``Opaque``).
    ``names``: the token of each declaration as a reference; ``heap_names``: its bare name (for
    ``heap[slot]``, quoted by ``heap_quote``); ``bools``: ``(false, true)`` tokens; ``flags``:
    ``(bit, token)`` pairs; ``f32``: the Python formatter of float32 bits; ``prefix``, ``suffix``
    and ``last_suffix`` go around every line (``last_suffix`` after the stream's last command).
    """

    cdef POp* ops
    cdef int nops
    cdef list toks
    cdef int64_t[::1] tok_off
    cdef int32_t[::1] tok_len
    cdef bytes blob
    cdef const char* bp
    cdef int names_first, nnames, heap_first, bool_first, nflags
    cdef int flag_bit[8]
    cdef int flag_tok[8]
    cdef object f32
    cdef bint json
    cdef bytes heap_quote, prefix, suffix, last_suffix

    def __cinit__(self):
        self.ops = NULL

    def __dealloc__(self):
        free(self.ops)

    def __init__(self, list ops, list names, list heap_names, tuple bools, list flags, f32, bint json,
                 bytes heap_quote, bytes prefix, bytes suffix, bytes last_suffix):
        toks = []

        def tok(bytes b):
            toks.append(b)
            return len(toks) - 1

        self.nops = len(ops)
        self.ops = <POp*>malloc(sizeof(POp) * max(self.nops, 1))
        if self.ops == NULL:
            raise MemoryError
        memset(self.ops, 0, sizeof(POp) * max(self.nops, 1))
        cdef POp* op
        for code, desc in enumerate(ops):
            op = &self.ops[code]
            if desc is None:
                continue
            head, positional, keywords, var = desc
            op.usable = 1
            op.head_tok = tok(head)
            op.npos = len(positional)
            for i, a in enumerate(positional):
                _fill_parg(&op.args[a[0]], a, tok)
                op.pos[i] = a[0]
            op.nkw = len(keywords)
            for i, a in enumerate(keywords):
                _fill_parg(&op.args[a[0]], a, tok)
                op.kw[i] = a[0]
            op.has_var = var is not None
            if var is not None:
                _fill_parg(&op.var, var, tok)
        self.names_first = len(toks)
        self.nnames = len(names)
        for b in names:
            tok(b)
        self.heap_first = len(toks)
        for b in heap_names:
            tok(b)
        self.bool_first = len(toks)
        tok(bools[0])
        tok(bools[1])
        if len(flags) > 8:
            raise ValueError("at most 8 flags")
        self.nflags = len(flags)
        for i in range(self.nflags):
            self.flag_bit[i] = flags[i][0]
            self.flag_tok[i] = tok(flags[i][1])
        offs = np.zeros(len(toks) + 1, np.int64)
        offs[1:] = np.cumsum([len(b) for b in toks])
        self.blob = b"".join(toks)
        self.bp = PyBytes_AS_STRING(self.blob)
        self.tok_off = offs
        self.tok_len = np.array([len(b) for b in toks] or [0], np.int32)
        self.toks = toks
        self.f32 = f32
        self.json = json
        self.heap_quote, self.prefix, self.suffix, self.last_suffix = heap_quote, prefix, suffix, last_suffix

    cdef inline int _tok(self, Out* o, int t) except -1:
        return _put(o, self.bp + self.tok_off[t], self.tok_len[t])

    cdef int _value(self, Out* o, PArg* a, int64_t v) except -1:
        """Print value ``v`` of ``a``: 0, or 1 if it has no canonical token here (Python prints it)."""
        cdef const char* s
        cdef Py_ssize_t k
        cdef int64_t h
        if a.kind == K_U32 or a.kind == K_I32 or a.kind == K_U64:
            _put_int(o, v, a.hex_big)
        elif a.kind == K_REF:
            if v < 0 or v >= self.nnames:
                return 1
            self._tok(o, self.names_first + <int>v)
        elif a.kind == K_ENUM:
            if v < 0 or v >= a.tok_count:
                return 1
            self._tok(o, a.tok_first + <int>v)
        elif a.kind == K_HEAPREF:
            h = v >> 32
            if h < 0 or h >= self.nnames:
                return 1
            _put(o, PyBytes_AS_STRING(self.heap_quote), PyBytes_GET_SIZE(self.heap_quote))
            self._tok(o, self.heap_first + <int>h)
            _put(o, "[", 1)
            _put_int(o, v & U32_MAX, False)
            _put(o, "]", 1)
            _put(o, PyBytes_AS_STRING(self.heap_quote), PyBytes_GET_SIZE(self.heap_quote))
        elif a.kind == K_BOOL:
            self._tok(o, self.bool_first + (1 if v else 0))
        elif a.kind == K_F32:
            s = PyUnicode_AsUTF8AndSize(self.f32(v), &k)
            _put(o, s, k)
        else:
            return 1
        return 0

    cdef int _line(self, Out* o, POp* op, const int64_t* row, const int64_t* var, Py_ssize_t nvar,
                   int fl) except -1:
        """Print one command (0), or 1 if Python must print it (``o`` is then rewound by the caller)."""
        cdef int m, nopt = 0, first
        cdef Py_ssize_t k
        cdef PArg* a
        cdef const char* sep = ", " if self.json else " "
        cdef Py_ssize_t seplen = 2 if self.json else 1
        self._tok(o, op.head_tok)
        for m in range(op.npos):
            a = &op.args[op.pos[m]]
            _put(o, sep, seplen)
            if self._value(o, a, row[a.col]):
                return 1
        if op.has_var:
            for k in range(nvar):
                _put(o, sep, seplen)
                if self._value(o, &op.var, var[k]):
                    return 1
        for m in range(op.nkw):
            a = &op.args[op.kw[m]]
            if row[a.col] == a.dflt:
                continue
            if not self.json:
                _put(o, " ", 1)
            elif nopt == 0:
                _put(o, ", {", 3)
            else:
                _put(o, ", ", 2)
            nopt += 1
            self._tok(o, a.key_tok)
            if self._value(o, a, row[a.col]):
                return 1
        if fl:
            if self.json:
                if nopt == 0:
                    _put(o, ", {", 3)
                else:
                    _put(o, ", ", 2)
                nopt += 1
                _put(o, '"flags": [', 10)
                first = 1
                for m in range(self.nflags):
                    if fl & self.flag_bit[m]:
                        if not first:
                            _put(o, ", ", 2)
                        first = 0
                        self._tok(o, self.flag_tok[m])
                _put(o, "]", 1)
            else:
                for m in range(self.nflags):
                    if fl & self.flag_bit[m]:
                        _put(o, " ", 1)
                        self._tok(o, self.flag_tok[m])
        if self.json:
            if nopt:
                _put(o, "}", 1)
            _put(o, "]", 1)
        return 0

    def format(self, op, args, var_off, var_len, pool, flags, Py_ssize_t start):
        """``(text, stop)``: the lines of commands ``start..stop-1``, each with ``prefix`` and
        ``suffix``; ``stop`` is the first command Python must print (or the stream's length)."""
        cdef const uint16_t[::1] v_op = np.ascontiguousarray(op, np.uint16)
        cdef const int64_t[:, ::1] v_args = np.ascontiguousarray(args, np.int64).reshape(-1, 6)
        cdef const int64_t[::1] v_off = np.ascontiguousarray(var_off, np.int64)
        cdef const int32_t[::1] v_len = np.ascontiguousarray(var_len, np.int32)
        cdef const int64_t[::1] v_pool = np.ascontiguousarray(pool, np.int64)
        cdef const uint8_t[::1] v_fl = np.ascontiguousarray(flags, np.uint8)
        cdef Py_ssize_t n = v_op.shape[0], i, mark, npool = v_pool.shape[0]
        cdef Py_ssize_t plen = len(self.prefix), slen = len(self.suffix), lslen = len(self.last_suffix)
        cdef const char* pre = PyBytes_AS_STRING(self.prefix)
        cdef const char* suf = PyBytes_AS_STRING(self.suffix)
        cdef const char* lsuf = PyBytes_AS_STRING(self.last_suffix)
        cdef int code
        cdef int64_t o0
        cdef Out o
        cdef POp* sp
        o.p = NULL
        o.n = 0
        o.cap = 0
        try:
            _reserve(&o, 4096 + 48 * min(n - start, 1 << 16))
            i = start
            while i < n:
                code = v_op[i]
                if code >= self.nops or not self.ops[code].usable:
                    break
                sp = &self.ops[code]
                o0 = v_off[i]
                if v_len[i] and (v_len[i] < 0 or o0 < 0 or o0 > npool - v_len[i]):
                    break
                mark = o.n
                _put(&o, pre, plen)
                if self._line(&o, sp, &v_args[i, 0], &v_pool[o0] if v_len[i] else NULL, v_len[i], v_fl[i]):
                    o.n = mark
                    break
                if i == n - 1:
                    _put(&o, lsuf, lslen)
                else:
                    _put(&o, suf, slen)
                i += 1
            return PyUnicode_DecodeUTF8(o.p, o.n, "strict"), i
        finally:
            free(o.p)


cdef int _fill_parg(PArg* a, tuple desc, tok) except -1:
    col, kind, dflt, hex_big, enum_tokens, key_token = desc
    a.kind = _KINDS.get(kind, K_OTHER)
    a.col = col
    a.dflt = dflt
    a.hex_big = hex_big
    a.tok_first = -1
    a.tok_count = len(enum_tokens)
    for i, t in enumerate(enum_tokens):
        k = tok(t)
        if i == 0:
            a.tok_first = k
    a.key_tok = tok(key_token) if key_token is not None else -1
    return 0


def text_scanner(bytes data, list ops, list flags, uint32_t buffer_bit, Py_ssize_t capacity=-1):
    """A reader of ``data`` (UTF-8 ``.dstream`` text) into command columns; see ``_TextScanner``."""
    return _TextScanner(data, ops, flags, buffer_bit, capacity)


def command_printer(list ops, list names, list heap_names, tuple bools, list flags, f32, bint json, bytes heap_quote,
                    bytes prefix, bytes suffix, bytes last_suffix):
    """A printer of command lines (text or JSON); see ``_CommandPrinter``."""
    return _CommandPrinter(ops, names, heap_names, bools, flags, f32, json, heap_quote, prefix, suffix, last_suffix)


def format_words(bytes prefix, words, int per_line):
    """``data`` lines: ``prefix`` and up to ``per_line`` words (decimal below 0x10000, else ``0x``
    hex), one line each, every line ended by a newline."""
    cdef const uint32_t[::1] w = np.ascontiguousarray(words, np.uint32)
    cdef Py_ssize_t n = w.shape[0], i
    cdef Out o
    o.p = NULL
    o.n = 0
    o.cap = 0
    try:
        _reserve(&o, 12 * n + 64)
        for i in range(n):
            if i % per_line == 0:
                if i:
                    _put(&o, "\n", 1)
                _put(&o, PyBytes_AS_STRING(prefix), PyBytes_GET_SIZE(prefix))
            else:
                _put(&o, " ", 1)
            _put_int(&o, w[i], True)
        if n:
            _put(&o, "\n", 1)
        return PyUnicode_DecodeUTF8(o.p, o.n, "strict")
    finally:
        free(o.p)


# ============================================================================ JSON arrays
cdef inline Py_ssize_t _skip_ws(str text, Py_ssize_t i, Py_ssize_t n) noexcept:
    cdef Py_UCS4 c
    while i < n:
        c = text[i]
        if c != u' ' and c != u'\t' and c != u'\n' and c != u'\r':
            break
        i += 1
    return i


def scan_json_array(str text, Py_ssize_t idx, scan):
    """``(items, offsets, end)`` of the JSON array at ``text[idx] == '['``, each item parsed by
    ``scan(text, offset) -> (value, end)`` (:mod:`json`'s scanner, whose errors propagate); None
    where a ``,`` or ``]`` is missing (``jsonfmt._scan_array`` is the pure twin)."""
    cdef Py_ssize_t n = len(text)
    cdef Py_UCS4 c
    cdef list items = []
    cdef list offs = []
    idx = _skip_ws(text, idx + 1, n)
    if idx < n and text[idx] == u']':
        return items, offs, idx + 1
    while True:
        offs.append(idx)
        v, idx = scan(text, idx)
        items.append(v)
        idx = _skip_ws(text, idx, n)
        if idx >= n:
            return None
        c = text[idx]
        if c == u',':
            idx = _skip_ws(text, idx + 1, n)
        elif c == u']':
            return items, offs, idx + 1
        else:
            return None
