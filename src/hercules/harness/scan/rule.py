"""A rule: one threat's static evidence, and whether a check on the running candidate judges the
same threat (then the rule's findings are hints: said in the verdict, never a flag by themselves).

A rule subclass names its ``flag``, says either ``covered_by`` (the dynamic check, and the devices
it runs on) or ``static_only_because`` (why no dynamic check can see the threat), and implements
the hooks it needs. The walker calls the hooks during its one walk of the file, in source-walk
order; ``finish`` runs after the walk, and ``on_source`` for each embedded CUDA/C++ source last.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from hercules.harness.records import Flag
from hercules.harness.scan.context import ScanContext
from hercules.harness.scan.events import AttributeWrite, CallSite, EmbeddedSource, EnvAccess, SubscriptWrite


@dataclass(frozen=True)
class DynamicCheck:
    """A check of the running candidate that judges a threat: what it measures, and on which device
    types ("cpu", "cuda") it runs."""

    name: str
    devices: frozenset[str]

    def runs_on(self, device: str) -> bool:
        """``device`` as the verdict names it ("cpu", "cuda", "cuda:0")."""
        return device.split(":")[0] in self.devices


class Rule:
    flag: ClassVar[Flag]
    covered_by: ClassVar[DynamicCheck | None] = None
    static_only_because: ClassVar[str] = ""
    # Raw nodes this rule wants to see (``on_node``), besides the events every rule may take.
    node_types: ClassVar[tuple[type[ast.AST], ...]] = ()

    def __init__(self, ctx: ScanContext):
        self.ctx = ctx

    def add(self, where: ast.AST | int, reason: str, *, conditional: bool = False,
            fallback_lines: Iterable[tuple[int, int]] = (), note: bool = False) -> None:
        self.ctx.findings.add(self.flag, where, reason, conditional=conditional, fallback_lines=fallback_lines,
                              note=note)

    # ---- hooks (each a no-op unless a rule overrides it) -----------------------------------------
    def on_node(self, node: ast.AST) -> None:
        """A node of one of ``node_types``."""

    def on_reference(self, node: ast.AST, qual: str) -> None:
        """A dotted name used: imported, or loaded as a name or an attribute."""

    def on_call(self, call: CallSite) -> None:
        pass

    def on_attribute_write(self, write: AttributeWrite) -> None:
        pass

    def on_subscript_write(self, write: SubscriptWrite) -> None:
        pass

    def on_env(self, access: EnvAccess) -> None:
        pass

    def finish(self) -> None:
        """After the walk: analyses of whole functions or of the whole file."""

    def on_source(self, source: EmbeddedSource) -> None:
        """A CUDA/C++ source held in a string literal."""
