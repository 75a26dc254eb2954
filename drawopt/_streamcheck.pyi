"""Type stub of the IR check's compiled value pass (``cext/_streamcheck.pyx``; pure twin
``drawopt.ir.stream._values_ok_py``)."""

import numpy.typing as npt

__all__ = ["values_ok"]

def values_ok(
    op: npt.ArrayLike,
    args: npt.ArrayLike,
    var_off: npt.ArrayLike,
    var_len: npt.ArrayLike,
    pool: npt.ArrayLike,
    ckind: npt.ArrayLike,
    lo: npt.ArrayLike,
    hi: npt.ArrayLike,
    mask: npt.ArrayLike,
    vkind: npt.ArrayLike,
    vlo: npt.ArrayLike,
    vhi: npt.ArrayLike,
    vmask: npt.ArrayLike,
    vmin: npt.ArrayLike,
    vmax: npt.ArrayLike,
    kinds: npt.ArrayLike,
    hsizes: npt.ArrayLike,
    nstr: int,
    ndecl: int,
) -> bool:
    """Whether every argument and variadic value of the stream passes its check; see
    ``drawopt.ir.stream._values_ok``."""
    ...
