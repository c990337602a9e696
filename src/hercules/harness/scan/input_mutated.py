"""Inputs modified in place by the candidate (so the reference, or the next call, sees other
values). The worker compares the inputs before and after each traced call; a modification made
only on some calls (when an input object comes round again, say) is not raised in the trials, so a
finding is a flag. The analysis is shared with output_aliases_input (``alias_flow``)."""

from __future__ import annotations

from hercules.harness.records import Flag
from hercules.harness.scan.alias_flow import AliasFlowRule


class InputMutated(AliasFlowRule):
    flag = Flag.INPUT_MUTATED
    static_only_because = ("the worker compares inputs around the traced calls only; a modification made on "
                           "other calls leaves nothing there")
