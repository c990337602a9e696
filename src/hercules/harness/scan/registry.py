"""Every rule of the static scan, one per threat (one per ``Flag`` the scan can raise), in the order
the walker serves them."""

from __future__ import annotations

from hercules.harness.scan.background_thread import BackgroundThread
from hercules.harness.scan.global_state import GlobalState
from hercules.harness.scan.input_mutated import InputMutated
from hercules.harness.scan.monkey_patch import MonkeyPatch
from hercules.harness.scan.output_aliases_input import OutputAliasesInput
from hercules.harness.scan.precision_downcast import PrecisionDowncast
from hercules.harness.scan.problem_edit import ProblemEdit
from hercules.harness.scan.reference_fallback import ReferenceFallback
from hercules.harness.scan.result_cache import ResultCache
from hercules.harness.scan.rule import DynamicCheck, Rule
from hercules.harness.scan.side_stream import SideStream
from hercules.harness.scan.swallowed_exception import SwallowedException
from hercules.harness.scan.tensor_subclass import TensorSubclass

# Whole-file analyses finish in this order: fallbacks and swallowed exceptions, then the functions'
# result caches and the inputs' flow (what an internal failure of one keeps of the others).
RULES: tuple[type[Rule], ...] = (
    SideStream, BackgroundThread, MonkeyPatch, GlobalState, PrecisionDowncast, TensorSubclass, ProblemEdit,
    ReferenceFallback, SwallowedException, ResultCache, InputMutated, OutputAliasesInput,
)


def rule_for(flag: str) -> type[Rule] | None:
    """The rule that raises ``flag`` (a Flag value), if the scan raises it at all."""
    for rule in RULES:
        if rule.flag.value == flag:
            return rule
    return None


def dynamic_check_for(flag: str, device: str) -> DynamicCheck | None:
    """The check of the running candidate that judges ``flag``'s threat on ``device``, if any: a
    static finding of that flag is then a hint, not a flag."""
    rule = rule_for(flag)
    check = rule.covered_by if rule is not None else None
    return check if check is not None and check.runs_on(device) else None
