"""Docs that run: every ``sh`` and ``python`` block of README.md and docs/*.md is executed.

Each document's blocks run in order in one fresh directory that holds the
bundled examples (``examples/`` and, at the top, a copy of every example stream,
so ``frame.dstream`` exists) and links to ``bench/`` and ``tests/``; ``drawopt``
on ``PATH`` is the CLI of the tree under test. A shell block runs under
``bash -e -o pipefail`` (every command must succeed); a Python block runs as a
script. New documents are picked up automatically. Where drawopt is not
installed with its ``pytest11`` entry point, ``PYTEST_PLUGINS`` loads the golden
plugin for the blocks, as the installed entry point would.

Markers, as HTML comments on the lines just above a block (keep them few; each
says why):

``<!-- not-run: REASON -->``
    never run (installs, benchmarks that take minutes, illustrative output).
``<!-- needs: egl -->``
    run only when an EGL OpenGL context can be made (the replayer).
``<!-- slow: REASON -->``
    run only in the ``slow`` variant of the document's test (``-m slow``).

A block with no language whose first line looks like a command fails the test:
tag it ``sh`` (or ``text`` for output and synopses). Documents may not refer to
files outside the repository (``SPEC.md``, ``shared/``) or to ``.md`` files that
do not exist.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

SHELL = {"sh", "bash", "shell", "console"}
PYTHON = {"python", "py"}
COMMANDISH = re.compile(r"^(\$ |drawopt |python3? |pip |bash |git |sh )")
MARKER = re.compile(r"^<!--\s*(not-run|needs|slow)\s*:\s*(.*?)\s*-->\s*$")
TIMEOUT_S = 600


@dataclass
class Block:
    doc: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    markers: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    """The fenced blocks of ``doc`` with the markers above each."""
    lines = doc.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)", lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(2), m.group(3).lower()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        markers: dict[str, str] = {}
        k = i - 1
        while k >= 0 and (MARKER.match(lines[k].strip()) or not lines[k].strip()):
            mk = MARKER.match(lines[k].strip())
            if mk:
                markers[mk.group(1)] = mk.group(2)
            elif k < i - 1:
                break  # a blank line ends the marker lines (one blank line before the fence is fine)
            k -= 1
        out.append(Block(doc, i + 1, lang, "\n".join(lines[i + 1:j]) + "\n", markers))
        i = j + 1
    return out


def runnable(b: Block) -> bool:
    return b.lang in SHELL | PYTHON


def _egl() -> tuple[bool, str]:
    try:
        from drawopt.replay import available
    except ImportError as e:
        return False, str(e)
    ok, why = available()
    return bool(ok), str(why)


def _workdir(tmp: Path) -> dict[str, str]:
    for p in (ROOT / "examples").iterdir():
        if p.is_file():
            shutil.copy(p, tmp / p.name)
    shutil.copytree(ROOT / "examples", tmp / "examples")
    for name in ("bench", "tests", "docs"):
        (tmp / name).symlink_to(ROOT / name)
    bindir = tmp / ".bin"
    bindir.mkdir()
    (bindir / "drawopt").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m drawopt "$@"\n')
    (bindir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bindir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    for f in bindir.iterdir():
        f.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTEST_ADDOPTS", None)
    from drawopt.testing import autoloads
    if not autoloads(env):
        # a source tree on PYTHONPATH: no installed entry point, so load the plugin as an install would
        env["PYTEST_PLUGINS"] = "drawopt.testing.pytest_plugin"
    return env


def _shell_text(b: Block) -> str:
    if b.lang == "console":  # only the prompt lines are commands
        return "\n".join(ln[2:] for ln in b.text.splitlines() if ln.startswith("$ ")) + "\n"
    return b.text


def run_doc(doc: Path, tmp: Path, slow: bool) -> None:
    env = _workdir(tmp)
    egl: tuple[bool, str] | None = None
    ran = 0
    for b in blocks(doc):
        if not runnable(b) or "not-run" in b.markers:
            continue
        if "slow" in b.markers and not slow:
            continue
        if b.markers.get("needs") == "egl":
            egl = egl or _egl()
            if not egl[0]:
                continue
        if b.lang in PYTHON:
            script = tmp / f".block_{b.line}.py"
            script.write_text(b.text)
            cmd = [sys.executable, str(script)]
        else:
            cmd = ["bash", "-e", "-o", "pipefail", "-c", _shell_text(b)]
        r = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0, (f"{b.where}: the {b.lang} block exited {r.returncode}:\n{b.text}\n"
                                   f"--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}")
        ran += 1
    if ran == 0:
        pytest.skip("no block of this document runs here")


def _id(doc: Path) -> str:
    return str(doc.relative_to(ROOT))


def _has_slow(doc: Path) -> bool:
    return any(runnable(b) and "slow" in b.markers and "not-run" not in b.markers for b in blocks(doc))


@pytest.mark.parametrize("doc", DOCS, ids=_id)
def test_doc_examples_run(doc: Path, tmp_path: Path) -> None:
    run_doc(doc, tmp_path, slow=False)


@pytest.mark.slow
@pytest.mark.parametrize("doc", [d for d in DOCS if _has_slow(d)], ids=_id)
def test_doc_examples_run_with_slow_ones(doc: Path, tmp_path: Path) -> None:
    run_doc(doc, tmp_path, slow=True)


@pytest.mark.parametrize("doc", DOCS, ids=_id)
def test_blocks_are_tagged_and_markers_justified(doc: Path) -> None:
    problems = []
    for b in blocks(doc):
        first = next((ln for ln in b.text.splitlines() if ln.strip()), "")
        if not b.lang and COMMANDISH.match(first):
            problems.append(f"{b.where}: a command block without a language: tag it ```sh (```text for output)")
        for key, reason in b.markers.items():
            if key == "needs" and reason != "egl":
                problems.append(f"{b.where}: unknown need '{reason}' (known: egl)")
            elif key in ("not-run", "slow") and len(reason) < 10:
                problems.append(f"{b.where}: <!-- {key}: --> needs a reason")
            if not runnable(b):
                problems.append(f"{b.where}: a marker on a block that would not run anyway ({b.lang or 'no language'})")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("doc", DOCS, ids=_id)
def test_doc_references_exist(doc: Path) -> None:
    text = doc.read_text()
    problems = [f"{_id(doc)}: refers to {m.group(0)!r}, which is not in the repository"
                for m in re.finditer(r"\bSPEC(\.md)?\b|(\.\./)?shared/seeds", text)]
    for m in re.finditer(r"`([\w./-]+\.md)`|\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        ref = m.group(1) or m.group(2)
        if re.match(r"^[a-z]+://", ref):
            continue
        if not any((base / ref).exists() for base in (ROOT, doc.parent)):
            problems.append(f"{_id(doc)}: refers to {ref}, which does not exist")
    assert not problems, "\n".join(problems)


def test_the_block_parser_reads_markers(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text("text\n\n<!-- not-run: installs things -->\n```sh\npip install x\n```\n\n"
                   "<!-- needs: egl -->\n<!-- slow: renders a big frame -->\n\n```sh\ndrawopt replay a\n```\n"
                   "```\nplain\n```\n")
    a, b, c = blocks(doc)
    assert a.markers == {"not-run": "installs things"} and a.text == "pip install x\n" and a.line == 4
    assert b.markers == {"needs": "egl", "slow": "renders a big frame"} and b.lang == "sh"
    assert c.markers == {} and c.lang == "" and not runnable(c)
