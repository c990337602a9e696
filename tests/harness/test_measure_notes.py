"""The side-by-side note's diagnosis: each side's own reports, as medians, in one clause."""

from __future__ import annotations

from hercules.harness.measure import OwnReport, reports_said


def test_each_sides_reports_are_said_as_medians_and_missing_ones_as_a_dash():
    candidate = [OwnReport(0.21, 3.0, 0.40), OwnReport(0.24, 5.0, 0.42), OwnReport(0.22, None, 0.41)]
    baseline = [OwnReport(0.16, 1.0, 0.35), OwnReport(0.17, 1.2, 0.36), OwnReport(0.18, 1.1)]
    said = reports_said(candidate, baseline)
    assert said == "; each side's own report, candidate/baseline medians: issue 0.22/0.17 ms a call, " \
                   "on the device 0.41/0.355 ms a call, packing 4/1.1 ms a burst"
    assert reports_said([OwnReport(0.0)], [OwnReport(0.16)]).endswith(
        "issue -/0.16 ms a call, packing -/- ms a burst")  # no device figure on either side: not said
    assert reports_said([], []) == ""
