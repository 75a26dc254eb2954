"""The .npz writer's bytes (threaded deflate, hand-laid members) and the reader's checks (issue 13)."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
from numpy.lib import format as npformat

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
