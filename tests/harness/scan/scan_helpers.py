"""What the per-rule tests share: running one rule alone, or the whole scan, over a snippet."""

from __future__ import annotations

import ast

from hercules.harness.scan import Finding, Rule, scan_candidate
from hercules.harness.scan.walker import scan_tree


def describe(findings: list[Finding]) -> str:
    return "; ".join(f"{f.flag}@{f.line}: {f.reason}" for f in findings)


def rule_findings(code: str, rule: type[Rule], dtype: str = "float32") -> list[Finding]:
    """The findings of ``rule`` alone (the walker serving no other rule)."""
    return scan_tree(ast.parse(code), dtype, (rule,))


def assert_fires(code: str, rule: type[Rule], dtype: str = "float32") -> None:
    """``rule`` alone raises its flag outright (not conditional, not a note) on ``code``."""
    findings = rule_findings(code, rule, dtype)
    assert rule.flag.value in {f.flag for f in findings if f.decisive}, describe(findings)
    assert {f.flag for f in findings} == {rule.flag.value}, f"a rule reports only its own flag: {describe(findings)}"


def assert_clean(code: str, dtype: str = "float32") -> None:
    """No rule of the whole scan finds anything in ``code``."""
    findings = scan_candidate(code, dtype)
    assert findings == [], describe(findings)
