"""Each problem's comparison (each candidate against every baseline) and the speedup's interval in
every report, from verdicts ``decide`` made; and a baseline added by its name alone reaching them."""

from __future__ import annotations

import io

import pytest
from comparison_run import VERDICTS, timed
from rich.console import Console

from hercules.harness import baselines
from hercules.report import formatting as fmt
from hercules.report.comparison import anchors, compare, comparisons
from hercules.report.console import print_verdict
from hercules.report.html import render_html
from hercules.report.markdown import render_markdown
from hercules.report.stats import summarize

ROWS = list(VERDICTS)
RELU = VERDICTS[0][3]


def test_one_comparison_per_problem_in_report_order_with_its_candidates():
    found = comparisons(ROWS)
    assert [p.problem for p in found] == ["level1_19_ReLU", "level1_23_Softmax", "level2_40_Matmul_Scaling",
                                          "level2_54_Conv2d_Multiply", "level3_1_MLP"]
    mlp = found[-1]
    assert mlp.level == 3 and [c.candidate for c in mlp.candidates] == ["fused_mlp", "split_k"]
    assert mlp.anchor == "problem-level3_1_MLP"


def test_baselines_in_their_declared_order_with_ratio_interval_and_the_fastest_as_best():
    c = compare("vectorised", RELU)
    assert [b.name for b in c.baselines] == ["eager", "compile", "compile_reduce_overhead", "cudagraph"]
    eager = c.baselines[0]
    assert eager.ms == 0.051 and eager.speedup == pytest.approx(1.02) and eager.interval == (0.98, 1.05)
    assert c.baselines[2].ms is None and c.baselines[2].speedup is None  # asked for, not measured
    assert c.best is not None and c.best.name == "compile" and c.best.ms == 0.04
    assert c.best.speedup == pytest.approx(0.8) and c.best.interval == (0.77, 0.83)
    assert c.bound == "memory" and not c.interpreted


def test_an_untimed_candidate_shows_the_baselines_without_a_best():
    crashed = compare("oob", VERDICTS[3][3])
    assert crashed.baselines == () and crashed.best is None and crashed.bound == ""
    wrong = compare("fp16_accum", VERDICTS[1][3])
    assert [(b.name, b.ms, b.speedup) for b in wrong.baselines] == [("eager", 0.2, None)] and wrong.best is None


def test_anchors_are_distinct_even_for_names_an_id_cannot_spell():
    ids = anchors(["conv|2d", "conv 2d", "conv|2d", "", "a"])
    assert ids == {"conv|2d": "problem-conv_2d", "conv 2d": "problem-conv_2d-2", "": "problem-unnamed",
                   "a": "problem-a"}


def test_every_report_shows_the_interval_where_measured():
    assert fmt.speedup_interval(1.0199, (0.981, 1.049)) == "1.02x [0.98-1.05] tie"  # inside the noise
    assert fmt.speedup_interval(1.32, (1.2, 1.45)) == "1.32x [1.20-1.45]"
    assert fmt.speedup_interval(1.02, None) == "1.02x" and fmt.speedup_interval(None, (1.0, 2.0)) == "n/a"
    md = render_markdown(summarize(ROWS), ROWS, "t")
    assert "| level1_19_ReLU | vectorised | ok |  | 0.0500 | 1.02x [0.98-1.05] tie | 0.80x [0.77-0.83] | n/a |" in md
    html = render_html(summarize(ROWS), ROWS, "t")
    assert '<td data-sort="1.0199999999999998">1.02x [0.98-1.05] tie</td>' in html  # sorted by the ratio alone
    out = io.StringIO()
    print_verdict(Console(file=out, width=200), RELU)
    shown = out.getvalue()
    assert "0.0510 ms, speedup 1.02x [0.98-1.05] tie" in shown and "speedup 0.80x [0.77-0.83]" in shown


def test_a_baseline_added_by_its_name_alone_reaches_every_report(monkeypatch):
    monkeypatch.setattr(baselines, "BASELINES", (*baselines.BASELINES, "tensorrt"))
    v = timed("p", "c", 0.5, {"eager": 1.0, "tensorrt": 0.4}, {"tensorrt": (0.75, 0.85)})
    rows = [("p", None, "c", v)]
    md = render_markdown(summarize(rows), rows, "t")
    assert "vs tensorrt" in md and "0.80x [0.75-0.85]" in md
    html = render_html(summarize(rows), rows, "t")
    assert "<th>vs tensorrt</th>" in html and '<tr data-name="tensorrt">' in html
    assert '<tr data-name="best" data-baseline="tensorrt">' in html
    out = io.StringIO()
    print_verdict(Console(file=out, width=200), v)
    assert "tensorrt" in out.getvalue() and "0.80x [0.75-0.85]" in out.getvalue()
