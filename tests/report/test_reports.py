"""The markdown and HTML reports: the right numbers, and an HTML file that needs no network."""

from __future__ import annotations

import base64
import re

from hercules.harness.records import Speedups, Status, Verdict
from hercules.report import labels
from hercules.report.html import render_html, sol_scatter, speedup_histogram, write_html
from hercules.report.markdown import render_markdown
from hercules.report.stats import summarize

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def v(status, eager=None, best=None, flags=(), cand_ms=None, sol=None, error=None, **speedups) -> Verdict:
    return Verdict(
        status=status,
        correct=status in (Status.OK, Status.SUSPICIOUS),
        flags=tuple(flags),
        error=error,
        max_abs_err=None,
        rel_err=None,
        ref_ms=1.0,
        cand_ms=cand_ms,
        speedup=Speedups(eager=eager, best=best, **speedups),
        sol_fraction=sol,
    )


# Eight rows: 4 ok (speedups vs eager 2, 8, 0.5 and one untimed), suspicious, incorrect, crash,
# build error. By hand: correctness 4/8 = 50.0%; vs eager fast_1 = fast_1.5 = 2/8 = 25.0%,
# fast_2 = 1/8 = 12.5%, mean 3.50x, median 2.00x, geomean 8^(1/3) = 2.00x; vs best (1.5, 4, 0.25)
# fast_1 = 25.0%, fast_1.5 = fast_2 = 12.5%, mean 1.92x, median 1.50x, geomean 1.5^(1/3) = 1.14x.
ROWS = [
    ("add", 1, "add_fast", v(Status.OK, 2.0, 1.5, cand_ms=0.5, sol=0.3, compile=1.8,
                             compile_reduce_overhead=1.7, cudagraph=1.6)),
    ("add", 1, "add_faster", v(Status.OK, 8.0, 4.0, cand_ms=0.125, sol=0.81)),
    ("matmul", 1, "mm_slow", v(Status.OK, 0.5, 0.25, cand_ms=2.0, sol=0.05)),
    ("matmul", 2, "mm_untimed", v(Status.OK)),
    ("matmul", 2, "mm_sneaky", v(Status.SUSPICIOUS, 10.0, 9.0, flags=("side_stream",), cand_ms=0.01, sol=1.4)),
    ("conv|2d", 2, "conv_<b>bad</b>", v(Status.INCORRECT, flags=("shape_mismatch",), error="max err 3.0")),
    ("conv|2d", None, "conv_dead", v(Status.CRASH, error="illegal memory access\nworker restarted")),
    ("norm", None, "norm_nobuild", v(Status.BUILD_ERROR, error="nvcc: error")),
]


def data_images(html: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)]


def test_markdown_contains_hand_computed_numbers():
    md = render_markdown(summarize(ROWS), ROWS, "Bench on H200")
    assert md.startswith("# Bench on H200\n")
    assert "| correctness rate | 50.0% |" in md
    assert "| candidates | 8 |" in md
    assert "| fast_0 | 50.0% | 50.0% |" in md
    assert "| fast_1 | 25.0% | 25.0% |" in md
    assert "| fast_1.5 | 25.0% | 12.5% |" in md
    assert "| fast_2 | 12.5% | 12.5% |" in md
    assert "| mean speedup | 3.50x | 1.92x |" in md
    assert "| median speedup | 2.00x | 1.50x |" in md
    assert "| geomean speedup | 2.00x | 1.14x |" in md
    assert "build_error 1, crash 1, incorrect 1, suspicious 1, ok 4" in md
    # Per level: level 1 has 3 ok rows, 2 of them faster than eager.
    assert "| 1 | 3 | 3 | 100.0% | 66.7% | 66.7% | 2.00x | 1.14x |" in md
    assert "| none | 2 | 0 | 0.0% | 0.0% | 0.0% | n/a | n/a |" in md


def test_markdown_candidate_table_rows():
    md = render_markdown(summarize(ROWS), ROWS, "t")
    all_candidates = md.split("## Candidates", 1)[1]
    header = next(line for line in all_candidates.splitlines() if line.startswith("| problem |"))
    assert header.split(" | ")[5:13] == ["vs eager", "vs compile", "vs compile-ro", "vs cudagraph", "vs expert",
                                         "vs best", "SOL", "expert kernel |"]
    assert "| add | add_fast | ok |  | 0.5000 | 2.00x | 1.80x | 1.70x | 1.60x | n/a | 1.50x | 30.0% | n/a |" in md
    assert "| matmul | mm_sneaky | suspicious | side_stream | 0.0100 | 10.00x |" in md
    # A pipe in a name is escaped so the table keeps its columns.
    conv = next(line for line in all_candidates.splitlines() if "conv_dead" in line)
    assert conv.startswith("| conv\\|2d | conv_dead | crash |")
    assert len(re.split(r"(?<!\\)\|", conv)) == len(re.split(r"(?<!\\)\|", header))
    # Sorted by level (none last), then problem, then candidate.
    table = md.split("## Candidates", 1)[1].strip().splitlines()[2:]  # skip header and rule
    order = [line.split(" | ")[1] for line in table]
    assert order == [
        "add_fast", "add_faster", "mm_slow", "conv_&lt;b>bad&lt;/b>", "mm_sneaky", "mm_untimed",
        "conv_dead", "norm_nobuild",
    ]


def test_markdown_with_no_rows():
    md = render_markdown(summarize([]), [], "empty")
    assert "| candidates | 0 |" in md
    assert "| correctness rate | n/a |" in md
    assert "| fast_1 | n/a | n/a |" in md
    assert "| geomean speedup | n/a | n/a |" in md


def test_html_is_self_contained_with_embedded_plots(tmp_path):
    meta = {"device": "NVIDIA H200", "versions": {"torch": "2.13"}, "run": 7}
    path = write_html(tmp_path / "out" / "report.html", summarize(ROWS), ROWS, "Bench <H200>", meta)
    html = path.read_text(encoding="utf-8")
    assert html.lstrip().startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    images = data_images(html)
    assert len(images) == 2 and all(img.startswith(PNG_MAGIC) for img in images)
    assert images[0] != images[1]
    # Nothing fetched from anywhere: no web addresses, no external scripts or stylesheets.
    assert "http://" not in html and "https://" not in html
    assert not re.search(r"<script[^>]*\bsrc=", html)
    assert not re.search(r"<link[^>]*\bhref=", html)
    # (links within the page, to a problem's comparison, fetch nothing)
    assert not re.search(r"""\b(?:src|href)\s*=\s*["'](?!data:|#)""", html)
    assert "@import" not in html and "url(" not in html
    # Content: title escaped, meta shown, numbers and statuses present, names escaped.
    assert "<title>Bench &lt;H200&gt;</title>" in html
    assert "NVIDIA H200" in html and "{&#34;torch&#34;: &#34;2.13&#34;}" in html
    assert "50.0%" in html and "2.00x" in html and "1.14x" in html
    assert 'class="status status-suspicious"' in html and '<span class="flag">side_stream</span>' in html
    assert "conv_&lt;b&gt;bad&lt;/b&gt;" in html and "<b>bad</b>" not in html
    assert "illegal memory access worker restarted" in html
    levels = html.split('<table id="levels">', 1)[1].split("</table>", 1)[0]
    assert '<td class="l">1</td><td>3</td><td>3</td><td>100.0%</td>' in levels
    assert '<td class="l">none</td><td>2</td><td>0</td><td>0.0%</td>' in levels
    assert "<th>fast_1.5 best</th>" in levels and "66.7%" in levels
    assert "no data" not in html  # both plots have data here
    assert not (tmp_path / "out" / "report.html.tmp").exists()


def test_html_candidate_table_has_one_row_per_candidate():
    html = render_html(summarize(ROWS), ROWS, "t", {})
    body = html.split('<table id="candidates"', 1)[1].split("</table>", 1)[0]
    assert body.count("<tr>") == len(ROWS) + 1  # plus the header row
    for _, _, name, _ in ROWS:
        if "<" not in name:
            assert f'<td class="l">{name}</td>' in body


def test_html_with_zero_ok_rows_notes_missing_data(tmp_path):
    rows = [
        ("add", 1, "a", v(Status.CRASH, error="boom")),
        ("add", 1, "b", v(Status.INCORRECT)),
        ("mm", 2, "c", v(Status.TIMEOUT)),
    ]
    html = write_html(tmp_path / "r.html", summarize(rows), rows, "nothing works", None).read_text()
    assert html.count("no data:") == 2  # one caption per plot
    assert len(data_images(html)) == 2
    assert "0.0%" in html and "n/a" in html
    assert speedup_histogram(rows).n_points == 0 and sol_scatter(rows).n_points == 0


def test_html_with_no_rows_at_all(tmp_path):
    html = write_html(tmp_path / "r.html", summarize([]), [], "empty", {}).read_text()
    assert len(data_images(html)) == 2 and html.count("no data:") == 2
    assert "n/a" in html


def test_plot_point_counts():
    # Speedups of ok rows: 3 vs eager + 3 vs best. SOL scatter: every row with a time and a SOL
    # fraction, whatever its status (the suspicious 1.4 "above light speed" row is the tell).
    assert speedup_histogram(ROWS).n_points == 6
    assert sol_scatter(ROWS).n_points == 4


# ---- KernelBench runs: per-level tables, two tolerances, the SOL scatter --------------------

from synthetic_run import ROWS as KB_ROWS  # noqa: E402

from hercules.harness.batch import BenchItem, BenchRow  # noqa: E402
from hercules.problems.model import Candidate, Problem  # noqa: E402
from hercules.report.bench import write_reports  # noqa: E402


def test_markdown_has_one_table_per_level_and_both_tolerances():
    md = render_markdown(summarize(KB_ROWS), KB_ROWS, "kb", sol_plot="sol_scatter.png")
    assert f"| {labels.STRICT_CHECK} | 6 of 9 (66.7%) |" in md
    assert f"| {labels.KERNELBENCH_CHECK} | 7 of 9 (77.8%) |" in md
    assert labels.CHECKS_DIFFER in md
    assert "| seconds per evaluation (median, total) | 14.0 s, 194.0 s |" in md
    sections = md.split("### Level ")[1:]
    assert [s.split("\n", 1)[0] for s in sections] == ["1", "2", "3"]
    level1 = sections[0]
    # Speedups 2.0, 1.0, 0.5: median 1.00x, inclusive quartiles 0.75x and 1.50x; seconds 8, 9, 12, 14.
    assert "median 1.00x, IQR 0.75x-1.50x (n=3)" in level1
    assert "strict 3 of 4 (75.0%), kernelbench 4 of 4 (100.0%)" in level1
    assert "median 10.5 s, total 43.0 s" in level1
    assert "| level1_1_Square_matmul | tiled | ok |  | 2.500 | 1.0% | 2.00x | 1.7% | 82.2% | memory | 12.0 s |" in level1
    assert "| skip_zeros | ok |  | 1.200 | 1.0% | 1.00x | 3.5% | 171.2% | memory |" in level1
    assert "| level1_23_Softmax | fp16_accum | incorrect |" in level1
    assert level1.split("### ")[0].count("| level1_") == 4 and "level2_" not in level1.split("## ")[0]
    # Problem numbers sort as numbers: 1, 14, 19, 23 (not 14, 19, 1, 23 as strings would).
    assert [line.split(" | ")[0][2:] for line in level1.splitlines() if line.startswith("| level1_")] == [
        "level1_1_Square_matmul", "level1_14_Matmul_upper_triangular", "level1_19_ReLU", "level1_23_Softmax"]
    level2 = sections[1]
    assert "suspicious 1" in level2 and "result_cache 1" in level2 and "build_error 1" in level2
    # The cached candidate beats the bytes it must move: no fraction (the floor is wrong there), not
    # a clamped 100% that would read as a kernel at the speed of light.
    assert "| level2_40_Matmul_Scaling | cached | suspicious | result_cache | 0.0100 | 1.0% | 100.00x | n/a | n/a |" in level2
    # The overview: median, IQR, both correctness rates and seconds per evaluation for each level.
    overview = md.split("## Per level", 1)[1].split("### Level", 1)[0]
    assert "| 1 | 4 | 3 | 75.0% | 25.0% | 25.0% | 1.00x | 1.00x | 1.00x | 0.75x-1.50x | 75.0% | 100.0% | 10.5 s |" in overview
    assert "![candidate time vs fraction of the speed of light](sol_scatter.png)" in md
    assert md.index("### Level 3") < md.index("## Speed of light") < md.index("## Candidates")


def test_suite_without_levels_has_no_level_sections():
    rows = [(p, None, c, v) for p, _, c, v in KB_ROWS]
    md = render_markdown(summarize(rows), rows, "suite")
    html = render_html(summarize(rows), rows, "suite", {})
    assert "### Level" not in md and "## Speed of light" not in md
    assert '<section class="level"' not in html


def test_html_has_level_sections_and_both_tolerances():
    html = render_html(summarize(KB_ROWS), KB_ROWS, "kb", {})
    tolerances = html.split('<table id="tolerances">', 1)[1].split("</table>", 1)[0]
    assert "<td>6 of 9 (66.7%)</td>" in tolerances and "<td>7 of 9 (77.8%)</td>" in tolerances
    for level, n in ((1, 4), (2, 3), (3, 2)):
        section = html.split(f'<section class="level" id="level-{level}">', 1)[1].split("</section>", 1)[0]
        assert section.count("<tr>") == n + 1  # plus the header
        assert f"level{level}_" in section and all(f"level{k}_" not in section for k in {1, 2, 3} - {level})
    level1 = html.split('id="level-1"', 1)[1].split("</section>", 1)[0]
    assert "median 1.00x, IQR 0.75x-1.50x (n=3)" in level1 and "median 10.5 s, total 43.0 s" in level1
    assert 'title="memory fraction' not in level1  # honest rows carry no SOL note above 1
    level2 = html.split('id="level-2"', 1)[1].split("</section>", 1)[0]
    assert 'beats the memory floor 0.01398 ms by 1.40x' in level2  # the cached row's note, on its SOL cell
    images = data_images(html)
    assert len(images) == 2 and all(img.startswith(PNG_MAGIC) for img in images)


def test_sol_scatter_marks_levels():
    # Five rows have both a time and a SOL fraction (over three levels, one marker each); the
    # cached row beat its floor and has none.
    plot = sol_scatter(KB_ROWS)
    assert plot.n_points == 5 and plot.png_bytes().startswith(PNG_MAGIC)


def test_bench_reports_write_the_scatter_beside_the_markdown(tmp_path):
    rows = [BenchRow(BenchItem(Problem(name=p, code="", source="kb", level=level),
                               Candidate(name=c, code="", source="kb", problem=p)), v, resumed=False)
            for p, level, c, v in KB_ROWS]
    data = write_reports(rows, tmp_path)
    assert (tmp_path / "sol_scatter.png").read_bytes().startswith(PNG_MAGIC)
    assert "](sol_scatter.png)" in (tmp_path / "summary.md").read_text()
    assert data["correct_outputs"] == {"strict": 6 / 9, "kernelbench": 7 / 9, "kernelbench_known": 9}
    assert data["seconds_per_evaluation"] == {"n": 9, "median": 14.0, "total": 194.0}
    assert '<section class="level" id="level-3">' in (tmp_path / "report.html").read_text()
