"""The HTML report as a reader sees it: loaded in a real headless Chromium, no console error,
every plot drawn with a size, the sorter working, a screenshot taken.

Skipped where no Chromium is installed (``apt-get install -y chromium`` on Debian; or point
``HERCULES_CHROMIUM`` at a binary). With ``HERCULES_KEEP_SCREENSHOT`` set, the screenshot is also
kept as ``benchmarks/results/report_screenshot.png``.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest
from headless_chromium import find_chromium, view_page
from synthetic_run import ROWS

from hercules.report.html import write_html
from hercules.report.stats import summarize

BROWSER = find_chromium()
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no Chromium binary (apt-get install -y chromium)")

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# Sort the all-candidates table by "cand ms" (its sixth column), as a reader clicking it would.
SORT_BY_TIME = """
(function () {
  var table = document.getElementById('candidates');
  table.querySelectorAll('thead th')[5].click();
  return Array.from(table.tBodies[0].rows).map(function (r) { return r.cells[2].textContent.trim(); });
})()
"""


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_report_renders_in_headless_chromium(tmp_path):
    meta = {"device": "NVIDIA H200", "torch": "2.11.0+cu130"}
    page = write_html(tmp_path / "report.html", summarize(ROWS), ROWS, "KernelBench on the H200", meta)
    view = view_page(BROWSER, page, probe=SORT_BY_TIME)

    assert view.errors == ()
    assert view.title == "KernelBench on the H200"
    # The two plots (speedup histogram, SOL scatter), decoded and laid out with a real size.
    assert sorted(i["id"] for i in view.images) == ["sol-plot", "speedup-plot"]
    for image in view.images:
        assert image["width"] > 100 and image["height"] > 100, image
        assert image["natural_width"] > 100 and image["natural_height"] > 100, image
    # Ascending time: the 0.01 ms cached candidate first, untimed rows (missing values) last.
    assert view.probe[:2] == ["cached", "vectorised"]
    assert set(view.probe[-3:]) == {"fp16_accum", "broken", "oob"}

    shot = tmp_path / "report_screenshot.png"
    shot.write_bytes(view.screenshot)
    width, height = png_size(shot.read_bytes())
    assert width >= 1300 and height > 900  # the whole page (less a scrollbar), beyond the first screen
    assert view.seconds < 20
    if os.environ.get("HERCULES_KEEP_SCREENSHOT"):
        kept = REPO / "benchmarks" / "results" / "report_screenshot.png"
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, kept)


def test_the_browser_check_sees_errors_and_broken_images(tmp_path):
    """The check above can fail: a console error, an exception and an undecodable image are seen."""
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><head><title>broken</title></head><body>'
                    '<figure id="bad"><img alt="x" src="data:image/png;base64,AAAA"></figure>'
                    '<script>console.error("plot failed"); undefinedFunction();</script></body></html>')
    view = view_page(BROWSER, page)
    assert any("plot failed" in e for e in view.errors)
    assert any("undefinedFunction" in e for e in view.errors)
    (image,) = view.images
    assert image["id"] == "bad" and image["natural_width"] == 0
