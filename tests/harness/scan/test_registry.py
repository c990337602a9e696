"""The rules as a set: one per flag the scan raises, each saying which dynamic check (if any)
judges its threat, and the README listing every flag that stays static-only somewhere."""

from __future__ import annotations

from pathlib import Path

from hercules.harness.records import Flag
from hercules.harness.scan import RULES, DynamicCheck, dynamic_check_for, rule_for

README = Path(__file__).resolve().parents[3] / "README.md"
DEVICES = ("cpu", "cuda")


def test_one_rule_per_flag_and_each_says_whether_a_dynamic_check_covers_it():
    assert len({rule.flag for rule in RULES}) == len(RULES)
    for rule in RULES:
        assert isinstance(rule.flag, Flag) and rule_for(rule.flag.value) is rule
        assert isinstance(rule.covered_by, DynamicCheck) or rule.covered_by is None, rule
        # A rule no check covers says why (the README's list repeats it).
        assert bool(rule.static_only_because) is (rule.covered_by is None), rule


def test_the_threats_judged_when_the_candidate_runs():
    covered = {(rule.flag.value, d) for rule in RULES for d in DEVICES if dynamic_check_for(rule.flag.value, d)}
    assert covered == {("side_stream", "cuda"), ("precision_downcast", "cpu"), ("precision_downcast", "cuda"),
                       ("result_cache", "cuda")}
    assert dynamic_check_for("side_stream", "cuda:1") is not None and dynamic_check_for("zero_output", "cpu") is None


def test_the_readme_lists_every_static_only_flag():
    text = README.read_text()
    listed = text[text.index("Static-only flags"):].split("\n- ")[0]
    for rule in RULES:
        for device in DEVICES:
            if dynamic_check_for(rule.flag.value, device) is None:
                assert f"`{rule.flag.value}`" in listed, (rule.flag.value, device)
