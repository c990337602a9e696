"""Honest labels: times under Triton's CPU interpreter are marked and kept out of the speedup
aggregates, the two correctness checks are named by what they are, and a verdict whose outputs
had the wrong shape shows no error figures."""

from __future__ import annotations

import io
from markupsafe import escape  # as the report template escapes

from rich.console import Console

from hercules.harness.records import BuildResult, CheckResult, Speedups, Status, TimingResult, Verdict
from hercules.report import labels
from hercules.report.console import print_verdict
from hercules.report.html import render_html
from hercules.report.markdown import render_markdown
from hercules.report.stats import summarize


def verdict(status: Status, *, language: str = "pytorch", device: str = "cpu", eager: float | None = None,
            flags: tuple[str, ...] = (), error: str | None = None, max_abs_err: float | None = None) -> Verdict:
    timed = eager is not None
    return Verdict(
        status=status, correct=status in (Status.OK, Status.SUSPICIOUS), flags=flags, error=error,
        max_abs_err=max_abs_err, rel_err=max_abs_err, ref_ms=1.0 if timed else None,
        cand_ms=1.0 / eager if timed else None,
        speedup=Speedups(eager=eager, best=eager) if timed else Speedups(), sol_fraction=None, device=device,
        baselines_ms={"eager": 1.0} if timed else {},
        build=BuildResult(ok=True, seconds=0.1, language=language),
        check=CheckResult(correct=status is Status.OK, trials=5, max_abs_err=max_abs_err, rel_err=max_abs_err,
                          ref_rel_err=None, correct_kernelbench=status is Status.OK),
        timing=TimingResult(method="perf_counter", reps=5, median_ms=1.0 / eager, mean_ms=1.0 / eager,
                            min_ms=1.0 / eager, max_ms=1.0 / eager, iqr_ms=0.0, std_ms=0.0, input_sets=1,
                            l2_flushed=False) if timed else None,
    )


ROWS = [
    ("relu", None, "torch", verdict(Status.OK, eager=2.0, max_abs_err=0.0)),
    ("relu", None, "cuda_like", verdict(Status.OK, eager=2.0, max_abs_err=0.0)),
    # Triton on the CPU: its interpreter's time (0.02x) is no kernel's speed.
    ("relu", None, "triton", verdict(Status.OK, language="triton", eager=0.02, max_abs_err=0.0)),
    ("softmax", None, "triton_slow", verdict(Status.TIMEOUT, language="triton", error="no answer within 60 s")),
]


def test_interpreted_rows_stay_out_of_fast_p_and_the_averages_and_are_shown_apart():
    summary = summarize(ROWS)
    assert summary.eager.n == 2 and summary.eager.geomean == 2.0  # 0.02x left out
    assert summary.fast(1.0) == 1.0  # both kernels over the two rows with a kernel time
    assert summary.fast(0.0) == 3 / 4  # correctness counts every row
    apart = summary.interpreted
    assert apart is not None and apart.n_rows == 2 and apart.n_ok == 1 and apart.eager.geomean == 0.02
    # Triton on a GPU is compiled: counted as any kernel.
    gpu = [(p, lv, c, verdict(Status.OK, language="triton", device="cuda:0", eager=3.0)) for p, lv, c, _ in ROWS[:1]]
    assert summarize(gpu).interpreted is None and summarize(gpu).eager.n == 1


def test_reports_label_interpreted_rows_and_name_both_checks():
    md = render_markdown(summarize(ROWS), ROWS, "labels")
    triton_row = next(line for line in md.splitlines() if "| triton |" in line)
    assert "(interpreted)" in triton_row
    assert "Timed under Triton's CPU interpreter (apart)" in md and "geomean 0.02x" in md
    assert labels.STRICT_CHECK in md and labels.KERNELBENCH_CHECK in md and labels.CHECKS_DIFFER in md
    html = render_html(summarize(ROWS), ROWS, "labels")
    assert 'id="interpreted"' in html and html.count('<span class="interp"') >= 1
    assert escape(labels.CHECKS_DIFFER) in html
    assert "Triton&#39;s CPU interpreter, which runs every program instance" in html  # the timeout's cause
    # The markdown says so too: in the timed-out row's status, and once below the table.
    timeout_row = next(line for line in md.splitlines() if "| triton_slow |" in line)
    assert "timeout (Triton CPU interpreted)" in timeout_row
    assert labels.INTERPRETED_TIMEOUT_NOTE in md
    # A timeout of a compiled kernel (a GPU's) is a plain timeout.
    gpu = verdict(Status.TIMEOUT, language="triton", device="cuda:0", error="no answer within 60 s")
    assert labels.status_text(gpu) == "timeout" and labels.status_text(ROWS[3][3]) != "timeout"


def _shown(v: Verdict) -> str:
    out = io.StringIO()
    print_verdict(Console(file=out, width=200), v)
    return out.getvalue()


def test_the_verdict_view_labels_interpreted_times_and_never_shows_unmeasured_errors():
    text = _shown(ROWS[2][3])
    assert "interpreted" in text and "not the kernel's speed" in text
    assert "upstream KernelBench (allclose 1e-2): pass" in text
    mismatch = verdict(Status.INCORRECT, flags=("shape_mismatch",), error="output 0: shape (4, 8) != (8, 4)",
                       max_abs_err=0.0)
    shown = _shown(mismatch)
    assert "max abs 0.0" not in shown and "not measured" in shown
    assert "Triton's CPU interpreter, which runs" in _shown(ROWS[3][3])
