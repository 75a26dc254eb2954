"""The Cython kernels are compiled with ``wraparound=False`` (setup.py): a negative index such as
``a[-1]`` is then passed on as it is, even to a Python object. numpy 2.4 happened to read it as
the last item; numpy 2.5 raises ``IndexError: index -4811 is out of bounds`` (``mdi``'s
``run_facts`` failed so on the device host's numpy 2.5.2). Kernels write ``a[n - 1]``."""

import re
from pathlib import Path

import pytest

CEXT = sorted((Path(__file__).resolve().parents[1] / "cext").glob("*.pyx"))
_NEG = re.compile(r"\w\[\s*-\s*\d+\s*\]")   # a[-1], not a slice a[:-1]


def _code(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside comments and triple-quoted strings."""
    out, in_doc = [], False
    for n, line in enumerate(text.splitlines(), 1):
        quotes = line.count('"""')
        if in_doc or quotes:
            if quotes % 2:
                in_doc = not in_doc
            continue
        out.append((n, line.split("#", 1)[0]))
    return out


def test_the_kernels_exist() -> None:
    assert len(CEXT) >= 5


@pytest.mark.parametrize("pyx", CEXT, ids=lambda p: p.name)
def test_no_negative_constant_index(pyx: Path) -> None:
    bad = [f"{pyx.name}:{n}: {line.strip()}" for n, line in _code(pyx.read_text()) if _NEG.search(line)]
    assert not bad, "negative index under wraparound=False:\n" + "\n".join(bad)
