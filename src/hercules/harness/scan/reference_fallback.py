"""Fallbacks to PyTorch: the candidate computes the result another way (usually the reference's
own operators) when its kernel is missing or raises.

A fallback is honest while the kernel works, so most are *conditional* findings carrying the
candidate's lines of the fallback; what decides is whether those lines run (the evaluation traces
the candidate's file from the import on). Three shapes: a kernel build caught by try/except; a
branch taken when the built module is missing (None, False, a flag the handler set); an except
handler on the forward path that computes the result another way. Only lines that run when the
fallback is taken are listed: a try at import or in __init__ that builds nothing (a device probe)
replaces no kernel and is no finding. Flags outright: a handler that runs on every call (its try
body uses a module that is only ever None), and fallbacks in C++ (no line of the file to trace).

Whether the fallback ran is the dynamic evidence already (the finding is conditional on it), and
a fallback that never runs in the trials leaves nothing else to see: no separate check covers it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from hercules.harness.records import Flag
from hercules.harness.scan.builds import (
    builder_functions,
    catches,
    computes,
    falls_through_to_fallback,
    forward_handlers,
    has_build,
    reraises,
)
from hercules.harness.scan.events import EmbeddedSource, source_pattern
from hercules.harness.scan.fallback_values import (
    UNKNOWN,
    FailedBuildValues,
    Key,
    State,
    agreed_constant,
    always_raises,
    bindings,
    key_of,
    none_only_keys,
    truth,
)
from hercules.harness.scan.rule import Rule
from hercules.harness.scan.syntax import TRY_NODES, runs, span, terminates, walk_body

_CPP_CATCH_RETURN = source_pattern(r"\bcatch\s*\([^)]*\)\s*\{[^{}]*?\breturn\b[^;{}]*\b(?:at|torch)::\w+")


@dataclass
class _Site:
    """One place a kernel is built, with what its keys hold when the build failed; not frozen, as
    its fallback lines are collected as the branches that use its keys are found."""
    node: ast.AST
    reason: str
    lines: list[tuple[int, int]]
    keys: dict[Key, tuple[object, frozenset[int]]]
    report_empty: bool  # reported even without a fallback line found (a caught build always is)


class ReferenceFallback(Rule):
    flag = Flag.REFERENCE_FALLBACK
    static_only_because = ("conditional already: the finding counts only if the traced fallback lines ran; one "
                           "that never runs in the trials leaves nothing else to see")

    def finish(self) -> None:
        ctx = self.ctx
        builders = builder_functions(ctx)
        bound = bindings(ctx)
        sites: list[_Site] = []
        state: State = {}
        in_build_tries: set[ast.AST] = set()
        none_only = none_only_keys(ctx, bound)
        for node in ctx.nodes:
            if isinstance(node, TRY_NODES):
                site = self._try(node, builders, none_only, len(sites))
                if site is not None:
                    sites.append(site)
                    state.update(site.keys)
                    in_build_tries.update(walk_body(node.body))
        for node in ctx.nodes:
            # A kernel built outside try/except, where the module may also be a constant (built only
            # on some paths): its missing-module branches are fallbacks as well.
            if isinstance(node, ast.Assign) and node not in in_build_tries and has_build(ctx, node.value, builders):
                keys = {}
                for target in node.targets:
                    key = key_of(ctx, target)
                    value = agreed_constant(bound.get(key, []), skip=node.value) if key else UNKNOWN
                    if key and key not in state and value is not UNKNOWN:
                        keys[key] = (value, frozenset({len(sites)}))
                if keys:
                    sites.append(_Site(node, "a kernel that is built only on some paths", [], keys, report_empty=False))
                    state.update(keys)
        if not sites:
            return
        values = FailedBuildValues(ctx, state)
        values.propagate(bound)
        for block in self._blocks():
            for index, stmt in enumerate(block):
                if isinstance(stmt, ast.If):
                    self._missing_module_branch(stmt, block[index + 1:], values, builders, sites)
        for node in ctx.nodes:
            if isinstance(node, ast.IfExp):
                self._missing_module_expression(node, values, builders, sites)
        for site in sites:
            if site.lines or site.report_empty:
                self.add(site.node, f"{site.reason}: a flag if its fallback runs", conditional=True,
                         fallback_lines=site.lines)

    def _try(self, node: ast.Try, builders: set[str], none_only: set[Key], index: int) -> _Site | None:
        if node.handlers and any(has_build(self.ctx, n, builders) for n in walk_body(node.body) if isinstance(n, ast.Call)):
            # Even when only ImportError is caught: a built module that fails to load raises it.
            return self._build_try(node, builders, index)
        handlers = forward_handlers(self.ctx, node, builders)
        if not handlers:
            return None
        always = always_raises(self.ctx, node.body, none_only)
        falls_through = falls_through_to_fallback(self.ctx, node)
        for handler in handlers:
            if not computes(self.ctx, handler.body):
                if falls_through:
                    # The handler resets a switch (or does nothing) and the code after the try
                    # computes the result another way: CUDA-L1's kernels do this in 129 places.
                    self.add(handler, "except handler falls through to code that computes the result another way: "
                                      "a flag if it runs", conditional=True, fallback_lines=[span(handler.body)])
                continue  # otherwise no other result: an exception swallowed, if anything
            if always and catches(handler, ("AttributeError", "TypeError")):
                self.add(handler, f"the try body uses {always}, which is only ever None: the except handler's "
                                  "fallback runs on every call")
            else:
                self.add(handler, "except handler computes the result another way: a flag if it runs",
                         conditional=True, fallback_lines=[span(handler.body)])
        return None

    def _build_try(self, node: ast.Try, builders: set[str], index: int) -> _Site | None:
        """A kernel build caught by try/except: the handler body and, found later, the branches taken
        when the module is missing are the fallback."""
        ctx = self.ctx
        handlers = [h for h in node.handlers if not reraises(h)
                    and not any(has_build(ctx, n, builders) for n in walk_body(h.body) if isinstance(n, ast.Call))]
        if not handlers:
            return None  # re-raised, or retried as another build: no fallback to the reference
        failed: dict[Key, object] = {}
        for handler in handlers:
            for sub in walk_body(handler.body):
                if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Constant):
                    for target in sub.targets:
                        key = key_of(ctx, target)
                        if key:
                            failed[key] = sub.value.value
        bound = bindings(ctx)
        for sub in walk_body(node.body):
            if isinstance(sub, ast.Assign) and has_build(ctx, sub.value, builders):
                for target in sub.targets:
                    key = key_of(ctx, target)
                    if key and key not in failed:
                        # Not reset by the handler: the value it had before the build.
                        failed[key] = agreed_constant(bound.get(key, []), skip=sub.value)
        keys = {k: (v, frozenset({index})) for k, v in failed.items() if v is not UNKNOWN}
        return _Site(handlers[0], "a failed kernel build is caught", [span(h.body) for h in handlers], keys,
                     report_empty=True)

    def _missing_module_branch(self, stmt: ast.If, rest: list[ast.stmt], values: FailedBuildValues,
                               builders: set[str], sites: list[_Site]) -> None:
        value, origin = values.eval(stmt.test)
        known = truth(value)
        if not origin or known is None:
            return
        if known:
            branch = stmt.body
        elif stmt.orelse:
            branch = stmt.orelse
        elif terminates(stmt.body):
            branch = rest  # if <module works>: return <kernel>  /  <fallback>
        else:
            return
        if not branch or self._builds_or_sets(branch, values.state, builders):
            return  # a lazy build or a state update, not a fallback
        if branch[-1:] and isinstance(branch[-1], ast.Raise) and not any(
                isinstance(n, ast.Return) for n in walk_body(branch)):
            return  # fails loudly instead of falling back
        for i in origin:
            sites[i].lines.append(span(branch))

    def _missing_module_expression(self, node: ast.IfExp, values: FailedBuildValues, builders: set[str],
                                   sites: list[_Site]) -> None:
        value, origin = values.eval(node.test)
        known = truth(value)
        if not origin or known is None:
            return
        part = node.body if known else node.orelse
        if has_build(self.ctx, part, builders):
            return
        stmt = self.ctx.parents.get(node)
        while stmt is not None and not isinstance(stmt, ast.stmt):
            stmt = self.ctx.parents.get(stmt)
        inside = set(ast.walk(part))
        own = {n.lineno for n in inside if hasattr(n, "lineno")}
        shared = {n.lineno for n in ast.walk(stmt if stmt is not None else node)
                  if hasattr(n, "lineno") and n not in inside and not isinstance(n, ast.stmt)}
        if stmt is not None:
            shared.add(stmt.lineno)
        # Only the lines nothing else of the statement runs on tell the fallback apart from the kernel.
        for run in runs(sorted(own - shared)):
            for i in origin:
                sites[i].lines.append(run)

    def _builds_or_sets(self, stmts: list[ast.stmt], state: State, builders: set[str]) -> bool:
        for sub in walk_body(stmts):
            if isinstance(sub, ast.Call) and has_build(self.ctx, sub, builders):
                return True
            if isinstance(sub, (ast.Name, ast.Attribute)) and isinstance(sub.ctx, ast.Store) \
                    and key_of(self.ctx, sub) in state:
                return True
        return False

    def _blocks(self):
        for node in self.ctx.nodes:
            for field in ("body", "orelse", "finalbody"):
                block = getattr(node, field, None)
                if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                    yield block

    def on_source(self, source: EmbeddedSource) -> None:
        for match in _CPP_CATCH_RETURN.finditer(source.text):
            self.add(source.line_at(match.start()), "CUDA/C++ source catches an error and returns a PyTorch result instead")
