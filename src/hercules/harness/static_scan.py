"""The static scan's public names, kept where callers import them from.

The scan itself lives in ``hercules.harness.scan``: one module per threat, served by one walk of
the candidate's syntax tree. ``evaluate.stage_scan`` looks ``scan_candidate`` up here at call time,
so replacing it on this module (tests that evaluate without the static scan) still works.
"""

from __future__ import annotations

from hercules.harness.scan import Finding, lines_executed, scan_candidate

__all__ = ["Finding", "lines_executed", "scan_candidate"]
