"""The HTML report: ``optimize --report R.html`` and ``drawopt report R.json -o R.html``.

The browser test renders the page in headless Chromium (Debian's ``chromium``,
driven by Playwright at ``/usr/bin/chromium``; ``.ci/install-system.sh``
installs both, no browser is ever downloaded) and checks that every plot is drawn
(non-white pixels inside each SVG's box) and that the page logs no console error.
It is skipped when chromium or playwright is missing.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from drawopt.cli import main

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "frame.dstream"
PLOTS = ("plot-passes", "plot-runs", "plot-reasons", "plot-graph")
CHROMIUM = os.environ.get("DRAWOPT_CHROMIUM", "/usr/bin/chromium")

pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def page_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("report")
    out = d / "f.opt.dstream"
    assert main(["optimize", str(EXAMPLE), "-o", str(out), "--verify-each", "--report", str(d / "r.html"),
                 "--range", "0:120", "-q"]) == 0
    assert main(["optimize", str(EXAMPLE), "-o", str(out), "--report", str(d / "r.json"), "-q"]) == 0
    assert main(["report", str(d / "r.json"), "-o", str(d / "r2.html")]) == 0
    return {"html": d / "r.html", "json": d / "r.json", "html2": d / "r2.html"}


def test_page_is_self_contained_and_small(page_files: dict[str, Path]) -> None:
    for key in ("html", "html2"):
        text = page_files[key].read_text()
        assert text.startswith("<!DOCTYPE html>")
        for ident in PLOTS:
            assert f'<svg id="{ident}"' in text, ident
        # offline: nothing fetched from anywhere (no src/href to a URL, no external script or stylesheet)
        assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', text)
        assert "<link" not in text and "<script src" not in text
        assert len(text) < 200_000
    text = page_files["html"].read_text()
    assert "200 draws -&gt; 107 calls (bound 101), 541 -&gt; 225 state changes, verified" in text
    assert "commands 0..119" in text


def test_json_report_carries_the_page_data(page_files: dict[str, Path]) -> None:
    r = json.loads(page_files["json"].read_text())
    assert r["target"] == "d3d12" and r["reorder"] == "declared" and r["lower_bound"] == 101
    assert [p["name"] for p in r["passes"]] == r["pipeline"]
    assert r["explain"]["pairs"] == r["after"]["draw_calls"] - 1 - r["explain"]["packed_pairs"]
    assert sum(int(k) * v for k, v in r["run_lengths"]["after"].items()) == r["after"]["draw_calls"]


def test_report_rejects_a_non_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"a": 1}')
    assert main(["report", str(bad), "-o", str(tmp_path / "x.html")]) == 2
    assert "not a drawopt optimize report" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def test_page_renders_in_headless_chromium(page_files: dict[str, Path]) -> None:
    if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
        pytest.skip(f"no chromium at {CHROMIUM} (sh .ci/install-system.sh)")
    sync_api = pytest.importorskip("playwright.sync_api")
    from PIL import Image

    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium"),
                                    headless=True, args=["--no-sandbox"])
        try:
            for key in ("html", "html2"):
                page = browser.new_page()
                page.on("console", lambda m: errors.append(f"{m.type}: {m.text}") if m.type == "error" else None)
                page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
                page.goto(page_files[key].as_uri())
                for ident in PLOTS:
                    el = page.locator(f"svg#{ident}")
                    box = el.bounding_box()
                    assert box and box["width"] > 100 and box["height"] > 50, (key, ident, box)
                    img = Image.open(io.BytesIO(el.screenshot())).convert("L")
                    inked = int((np.asarray(img) < 200).sum())
                    assert inked > 0.005 * img.width * img.height, (key, ident, inked)
                # the explain filter works: a category narrows the list, a nonsense query empties it
                total = page.locator("#explain tbody tr").count()
                assert total > 0
                page.select_option("#category", "state")
                shown = page.locator("#explain tbody tr:not([hidden])").count()
                assert 0 < shown < total
                page.fill("#filter", "no reason reads like this")
                assert page.locator("#explain tbody tr:not([hidden])").count() == 0
                assert page.text_content("#shown") == "0 shown"
                page.close()
        finally:
            browser.close()
    assert errors == []
