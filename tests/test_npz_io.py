"""The .npz writer's bytes (threaded deflate, hand-laid members) and the reader's checks (issue 13)."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
from numpy.lib import format as npformat

from drawopt.errors import InputError
from drawopt.gen import generate
from drawopt.ir.formats import npz


def zipfile_archive(arrays: dict[str, np.ndarray], level: int | None) -> bytes:
    """The archive as :mod:`zipfile` writes it member by member (the writer before issue 13)."""
    bio = io.BytesIO()
    comp = zipfile.ZIP_STORED if level == 0 else zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(bio, "w", compression=comp, allowZip64=True,
                         compresslevel=None if level == 0 else level) as zf:
        for name, a in arrays.items():
            with zf.open(name + ".npy", "w", force_zip64=True) as f:
                npformat.write_array(f, np.asanyarray(a), allow_pickle=False)
    return bio.getvalue()


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        "data_3": rng.integers(0, 1 << 32, 1000, dtype=np.uint32),
        "big": rng.integers(0, 40, 40 << 20, dtype=np.uint8),  # three 16 MiB write_array chunks
        "args": rng.integers(-5, 5, (5000, 6)),
        "empty": np.zeros(0, np.int32),
        "empty2d": np.zeros((0, 6), np.int64),
        "fortran": np.asfortranarray(rng.integers(0, 9, (300, 3))),
        "meta": np.frombuffer(b'{"drawopt": 1}', np.uint8),
    }


@pytest.mark.parametrize("level", [0, 1, None, 6])
@pytest.mark.parametrize("threads", [1, 2, 4])
def test_write_archive_bytes_equal_zipfiles(level: int | None, threads: int) -> None:
    arrays = _arrays()
    got = npz.write_archive(arrays, level, threads)
    assert got == zipfile_archive(arrays, level)
    with np.load(io.BytesIO(got), allow_pickle=False) as back:
        assert list(back.files) == list(arrays)
        for k, a in arrays.items():
            assert np.array_equal(back[k], a)


def test_write_archive_of_nothing() -> None:
    assert npz.write_archive({}) == zipfile_archive({}, 1)


def _members(s) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(npz.dumps_npz(s)), allow_pickle=False) as a:
        return {k: a[k] for k in a.files}


def _corrupt(data: bytes, member: str) -> bytes:
    """``data`` with one byte in the middle of ``member``'s deflated bytes flipped."""
    zi = zipfile.ZipFile(io.BytesIO(data)).getinfo(member)
    name_len, extra_len = np.frombuffer(data[zi.header_offset + 26:zi.header_offset + 30], "<u2")
    at = zi.header_offset + 30 + int(name_len) + int(extra_len) + zi.compress_size // 2
    return data[:at] + bytes([data[at] ^ 0x55]) + data[at + 1:]


def _error(data: bytes, threads: int, monkeypatch) -> str:
    monkeypatch.setattr(npz, "READER_THREADS", threads)
    with pytest.raises(InputError) as e:
        npz.loads_npz(data, "x.npz")
    return str(e.value)


@pytest.mark.parametrize("member", ["op.npy", "pool.npy", "args.npy"])
def test_corrupt_member_error_is_the_same_with_reader_threads(member: str, monkeypatch) -> None:
    data = _corrupt(npz.dumps_npz(generate("frame", 3000, seed=1)), member)
    one = _error(data, 1, monkeypatch)
    assert one.startswith("x.npz:1:1: error: corrupt .npz archive") and _error(data, 2, monkeypatch) == one


def test_tails_outside_the_pool_are_reported_by_the_stream_check(monkeypatch) -> None:
    """Stream.check owns the rule (the reader has no copy of it): the error names the command's
    line and the tail, threads or not; a corrupt args member beside it is met first (the reader
    reads every member before it checks the stream)."""
    arrays = _members(generate("frame", 3000, seed=1))
    arrays["var_off"] = arrays["var_off"].copy()
    arrays["var_off"][5] = arrays["pool"].shape[0] + 10
    m = arrays["pool"].shape[0]
    data = npz.write_archive(arrays)
    for threads in (1, 2):
        assert _error(data, threads, monkeypatch) == (
            f"x.npz:6:1: error: variadic arguments [{m + 10}, +{int(arrays['var_len'][5])}) outside the pool "
            f"of {m} values")
        assert "corrupt .npz archive" in _error(_corrupt(data, "args.npy"), threads, monkeypatch)


def test_threaded_read_gives_the_stream(monkeypatch) -> None:
    s = generate("frame", 3000, seed=2)
    data = npz.dumps_npz(s)
    monkeypatch.setattr(npz, "READER_THREADS", 2)
    assert npz.loads_npz(data) == s and npz.dumps_npz(npz.loads_npz(data)) == data
