"""Outputs that are an input or a view of one (the reference's inputs then change under the
comparison, or an identity passes as a result). The worker checks the traced calls' outputs for
shared memory; a path that returns an input only on some calls is not taken in the trials, so a
finding is a flag. The analysis is shared with input_mutated (``alias_flow``)."""

from __future__ import annotations

from hercules.harness.records import Flag
from hercules.harness.scan.alias_flow import AliasFlowRule


class OutputAliasesInput(AliasFlowRule):
    flag = Flag.OUTPUT_ALIASES_INPUT
    static_only_because = ("the worker checks the traced calls' outputs for shared memory; a path taken on other "
                           "calls leaves nothing there")
