"""The one walk of a candidate's syntax tree that serves every rule.

Per node, in ``ast.walk`` order, the walker makes the records several rules read (a reference to
a dotted name, a call, a write to a module's attribute or to a subscript, an environment access)
and hands them, then the raw node, to the rules that take them. After the walk each rule finishes
its whole-function analyses; the CUDA/C++ sources found in string literals come last. Python
source run by exec/eval/compile is scanned the same way, its findings reported at the call.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from hercules import pyparse
from hercules.harness.records import Flag
from hercules.harness.scan.context import ScanContext
from hercules.harness.scan.events import (
    AttributeWrite,
    EmbeddedSource,
    SubscriptWrite,
    call_site,
    embedded_source,
    env_accesses_of_call,
    env_accesses_of_environ,
    setattr_target,
)
from hercules.harness.scan.finding import Finding, Findings
from hercules.harness.scan.rule import Rule
from hercules.harness.scan.syntax import const_str

MAX_EXEC_DEPTH = 3  # exec'd source inside exec'd source ... scanned this deep
_STORES = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)


def scan_tree(tree: ast.Module, problem_dtype: str, rules: Sequence[type[Rule]], depth: int = 0) -> list[Finding]:
    """Findings of ``rules`` over one parsed file, sorted by line; what was found until an internal
    failure, if one happens (odd code must never break an evaluation)."""
    findings = Findings()
    try:
        ctx = ScanContext(tree, problem_dtype, findings, depth)
        _Walk(ctx, rules).run()
    except (Exception, RecursionError):
        pass
    return findings.sorted()


def _overrides(rule: Rule, hook: str) -> bool:
    return getattr(type(rule), hook) is not getattr(Rule, hook)


class _Walk:
    def __init__(self, ctx: ScanContext, rule_types: Sequence[type[Rule]]):
        self.ctx = ctx
        self.rule_types = rule_types
        self.rules = [kind(ctx) for kind in rule_types]
        self.taking = {hook: [r for r in self.rules if _overrides(r, hook)]
                       for hook in ("on_reference", "on_call", "on_attribute_write", "on_subscript_write", "on_env",
                                    "on_source")}
        self._by_type: dict[type, list[Rule]] = {}
        self.sources: list[EmbeddedSource] = []

    def run(self) -> None:
        for node in self.ctx.nodes:
            self._visit(node)
        for rule in self.rules:
            rule.finish()
        for source in self.sources:
            for rule in self.taking["on_source"]:
                rule.on_source(source)

    # ---- one node ----------------------------------------------------------------------------------
    def _visit(self, node: ast.AST) -> None:
        ctx = self.ctx
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self._raw(node)
            for full in _imported_paths(node):
                self._reference(node, full)
        elif isinstance(node, ast.Attribute):
            if isinstance(node.ctx, ast.Load):
                self._reference(node, ctx.qual(node))
            self._raw(node)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load) and node.id in ctx.aliases:
                self._reference(node, ctx.aliases[node.id])
            self._raw(node)
        elif isinstance(node, ast.Call):
            self._call(node)
        elif isinstance(node, _STORES):
            self._store(node)
            self._raw(node)
        else:
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                source = embedded_source(ctx, node)
                if source is not None:
                    self.sources.append(source)
            self._raw(node)

    def _raw(self, node: ast.AST) -> None:
        kind = type(node)
        rules = self._by_type.get(kind)
        if rules is None:
            rules = self._by_type[kind] = [r for r in self.rules if r.node_types and isinstance(node, r.node_types)]
        for rule in rules:
            rule.on_node(node)

    def _reference(self, node: ast.AST, qual: str | None) -> None:
        if not qual:
            return
        for rule in self.taking["on_reference"]:
            rule.on_reference(node, qual)
        if qual in ("os.environ", "os.environb") and isinstance(node, (ast.Name, ast.Attribute)):
            for access in env_accesses_of_environ(self.ctx, node):
                self._env(access)

    def _call(self, node: ast.Call) -> None:
        ctx = self.ctx
        call = call_site(ctx, node)
        for rule in self.taking["on_call"]:
            rule.on_call(call)
        target = setattr_target(ctx, call)
        if target is not None and ctx.rooted(target[0]):
            base, name = target
            self._attribute_write(AttributeWrite(node, f"{base}.{name or '<dynamic>'}", name or "",
                                                 node.args[2] if len(node.args) > 2 else None))
        for access in env_accesses_of_call(call):
            self._env(access)
        self._raw(node)
        if (ctx.builtin(node.func, "exec") or ctx.builtin(node.func, "eval") or ctx.builtin(node.func, "compile")) \
                and node.args and const_str(node.args[0]) and ctx.depth < MAX_EXEC_DEPTH:
            self._exec(const_str(node.args[0]), node)

    def _store(self, node: ast.AST) -> None:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets, value = [node.target], node.value
        else:
            targets, value = node.targets, None
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Attribute) and not isinstance(sub.ctx, ast.Load):
                    base = self.ctx.qual(sub.value)
                    if self.ctx.rooted(base):
                        self._attribute_write(AttributeWrite(sub, f"{base}.{sub.attr}", sub.attr,
                                                             value if sub is target else None))
                elif isinstance(sub, ast.Subscript) and not isinstance(sub.ctx, ast.Load):
                    container = self.ctx.qual(sub.value)
                    if container in ("os.environ", "os.environb"):
                        continue  # an environment access, seen as such
                    for rule in self.taking["on_subscript_write"]:
                        rule.on_subscript_write(SubscriptWrite(sub, container))

    def _attribute_write(self, write: AttributeWrite) -> None:
        for rule in self.taking["on_attribute_write"]:
            rule.on_attribute_write(write)

    def _env(self, access) -> None:
        for rule in self.taking["on_env"]:
            rule.on_env(access)

    def _exec(self, source: str, call: ast.Call) -> None:
        """Python source run by exec/eval/compile: scanned too, its findings reported at the call.
        Lines of exec'd source belong to "<string>", not to the candidate's file, so a tracer of
        that file never sees them run: a fallback hidden there is a flag outright."""
        try:
            tree = pyparse.parse(source)
        except (SyntaxError, ValueError):
            return
        for finding in scan_tree(tree, self.ctx.problem_dtype, self.rule_types, self.ctx.depth + 1):
            self.ctx.findings.add(Flag(finding.flag), call, f"in exec'd source: {finding.reason}", note=finding.note)


def _imported_paths(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The dotted paths an import statement names: each module, and each name taken from one."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    module = "." * (node.level or 0) + (node.module or "")
    fulls = [module] if module else []
    fulls += [f"{module}.{alias.name}" for alias in node.names if alias.name != "*"]
    return fulls
