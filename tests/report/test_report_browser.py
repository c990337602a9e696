"""The HTML report as a reader sees it: loaded in a real headless Chromium, no console error,
every plot drawn with a size, the sorter working, a screenshot taken.

Skipped where no Chromium is installed (``apt-get install -y chromium`` on Debian; or point
``HERCULES_CHROMIUM`` at a binary). With ``HERCULES_KEEP_SCREENSHOT`` set, the screenshot is also
kept as ``benchmarks/results/report_screenshot.png``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
from pathlib import Path

import pytest
from comparison_run import write_run
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


# Follow a problem's link in the candidates table as a reader would, then read every comparison
# section back as shown: per candidate its status, flags, SOL and each row's name, ms and speedup.
FOLLOW_AND_READ = """
(function () {
  var links = Array.from(document.querySelectorAll('a[href^="#problem-"]'));
  var broken = links.filter(function (a) { return !document.getElementById(a.getAttribute('href').slice(1)); });
  var link = Array.from(document.querySelectorAll('#candidates a')).find(function (a) {
    return a.textContent.trim() === 'level2_40_Matmul_Scaling';
  });
  link.click();
  var target = document.querySelector(':target');
  function text(node) { return node ? node.textContent.trim() : null; }
  var sections = Array.from(document.querySelectorAll('section.problem')).map(function (s) {
    return {id: s.id, title: text(s.querySelector('h3')), candidates: Array.from(s.querySelectorAll('.comparison')).map(
      function (c) {
        return {candidate: c.dataset.candidate, status: text(c.querySelector('.status')),
                flags: Array.from(c.querySelectorAll('.flag')).map(text), sol: text(c.querySelector('.sol')),
                rows: Array.from(c.querySelectorAll('tbody tr')).map(function (r) {
                  return {name: r.dataset.name, baseline: r.dataset.baseline || null,
                          ms: text(r.cells[1]), speedup: text(r.cells[2])};
                })};
      })};
  });
  return {links: links.length, broken: broken.length, href: link.getAttribute('href'), hash: location.hash,
          target: target ? target.id : null, top: target ? target.getBoundingClientRect().top : null,
          height: window.innerHeight, scrolled: window.scrollY, sections: sections};
})()
"""

SPEEDUP_TEXT = re.compile(r"^(\d+\.\d+)x(?: \[(\d+\.\d+)-(\d+\.\d+)\]( tie)?)?$")


def shown_number(text: str) -> float | None:
    return None if text == "n/a" else float(text)


def shown_speedup(text: str) -> tuple[float | None, tuple[float, float] | None]:
    """'1.02x [0.98-1.05] tie' -> (1.02, (0.98, 1.05)); '0.80x' -> (0.8, None); 'n/a' -> (None, None).
    An interval is marked a tie exactly when it holds 1.0."""
    if text == "n/a":
        return None, None
    match = SPEEDUP_TEXT.match(text)
    assert match, text
    low, high = match.group(2), match.group(3)
    if low:
        assert bool(match.group(4)) == (float(low) <= 1.0 <= float(high)), text
    return float(match.group(1)), (float(low), float(high)) if low else None


def same(shown, written, rel: float = 0.0, tol: float = 0.0) -> bool:
    """A figure on the page is the file's to the digits shown (numbers or [low, high] pairs), or
    both are absent ('n/a' on the page, null in the file)."""
    if shown is None or written is None:
        return shown is None and written is None
    if isinstance(shown, tuple):
        return len(shown) == len(written) and all(same(a, b, rel, tol) for a, b in zip(shown, written))
    return abs(shown - written) <= max(tol, rel * abs(written))


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


def test_each_problems_comparison_is_reached_from_the_report_and_shows_its_verdict_files(tmp_path):
    """A bench run's folder of verdict files, its report opened in Chromium: every problem link
    lands on its comparison, and every figure there is the one in that candidate's verdict.json."""
    rows = write_run(tmp_path / "run")
    page = write_html(tmp_path / "run" / "report.html", summarize(rows), rows, "comparison")
    view = view_page(BROWSER, page, probe=FOLLOW_AND_READ)
    assert view.errors == ()
    shown = view.probe
    # Links: each problem's name in the level tables and the candidates table (6 candidates, 6 + 6).
    assert shown["links"] == 12 and shown["broken"] == 0
    assert shown["hash"] == shown["href"] == "#" + shown["target"]
    assert shown["target"] == "problem-level2_40_Matmul_Scaling"
    assert shown["scrolled"] > 0 and 0 <= shown["top"] < shown["height"]  # brought into view

    by_title = {s["title"].split(" (level")[0]: s for s in shown["sections"]}
    assert len(shown["sections"]) == 5  # one per problem: MLP's two candidates share one
    for path in sorted((tmp_path / "run").glob("*/*/verdict.json")):
        problem, candidate = path.parent.parent.name, path.parent.name
        verdict = json.loads(path.read_text())
        (block,) = [c for c in by_title[problem]["candidates"] if c["candidate"] == candidate]
        assert block["status"] == verdict["status"] and block["flags"] == verdict["flags"]
        sol = None if block["sol"] == "n/a" else float(block["sol"].rstrip("%")) / 100
        assert same(sol, verdict["sol_fraction"], tol=0.0005)
        table = {row["name"]: row for row in block["rows"]}
        assert same(shown_number(table["candidate"]["ms"]), verdict["cand_ms"], rel=1e-3)
        speedup = verdict["speedup"]
        baselines = verdict["baselines_ms"]
        assert set(table) == {"candidate", *baselines, *(["best"] if speedup["best"] else [])}
        for name, ms in baselines.items():
            ratio, interval = shown_speedup(table[name]["speedup"])
            assert same(shown_number(table[name]["ms"]), ms, rel=1e-3), (problem, candidate, name)
            assert same(ratio, speedup[name], tol=0.005), (problem, candidate, name)
            assert same(interval, speedup["intervals"].get(name), tol=0.005), (problem, candidate, name)
        if speedup["best"]:
            fastest = min((name for name in baselines if speedup[name]), key=baselines.get)
            assert table["best"]["baseline"] == fastest
            ratio, interval = shown_speedup(table["best"]["speedup"])
            assert same(shown_number(table["best"]["ms"]), baselines[fastest], rel=1e-3)
            assert same(ratio, speedup["best"], tol=0.005)
            assert same(interval, speedup["intervals"].get("best"), tol=0.005), (problem, candidate)
    # The interval as a reader sees it, where the verdict has one, and none where it has not.
    relu = {row["name"]: row["speedup"] for row in by_title["level1_19_ReLU"]["candidates"][0]["rows"]}
    assert relu["eager"] == "1.02x [0.98-1.05] tie" and relu["best"] == "0.80x [0.77-0.83]"
    assert relu["compile_reduce_overhead"] == "n/a"
    split_k = {row["name"]: row["speedup"] for row in by_title["level3_1_MLP"]["candidates"][1]["rows"]}
    assert split_k["eager"] == "0.83x"
