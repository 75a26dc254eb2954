"""Type stubs of the compiled ``drawopt._packx`` kernels (cext/_packx.pyx)."""

import numpy as np

def runs(link: np.ndarray, ncalls: np.ndarray, cap: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...
def records(
    first: np.ndarray,
    ncalls: np.ndarray,
    low: np.ndarray,
    kbits: np.ndarray,
    words: np.ndarray,
    nwords: np.ndarray,
    align_words: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...
