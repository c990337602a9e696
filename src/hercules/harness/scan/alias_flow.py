"""Where the forward inputs go: which of them the candidate returns (or a view of) and which it
modifies in place, followed from ModelNew's forward into the file's own functions, methods and
submodules through summaries of what each returns and modifies.

Only the candidate's own inputs matter: a submodule handed an intermediate may return a view of it
or update it in place (ShuffleNet's channel shuffle, a residual ``x += identity``). Two rules read
the one analysis: input_mutated and output_aliases_input.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from hercules.harness.records import Flag
from hercules.harness.scan.context import ScanContext
from hercules.harness.scan.rule import Rule
from hercules.harness.scan.syntax import is_static, keyword, statements, walk_body

# Methods that return (a view of) their receiver, or the receiver itself when no copy is needed.
_VIEW_METHODS = {
    "view", "view_as", "reshape", "reshape_as", "t", "transpose", "permute", "expand", "expand_as", "squeeze",
    "unsqueeze", "narrow", "select", "as_strided", "detach", "flatten", "unflatten", "contiguous", "unfold",
    "diagonal", "movedim", "moveaxis", "swapaxes", "swapdims", "to", "type_as", "float", "view_as_real",
}
_VIEW_ATTRS = {"T", "mT", "H", "mH", "data", "real", "imag"}
_VIEW_FUNCS = {
    "torch.squeeze", "torch.unsqueeze", "torch.transpose", "torch.permute", "torch.narrow", "torch.select",
    "torch.t", "torch.detach", "torch.as_strided", "torch.movedim", "torch.diagonal", "torch.swapaxes",
    "torch.swapdims", "torch.reshape", "torch.flatten", "torch.view_as_real", "torch.view_as_complex",
}
_SAFE_INPLACE = {"requires_grad_", "share_memory_", "retain_grad_", "record_stream_"}
# Views that are not contiguous, so .contiguous() of one copies (bar degenerate shapes, which the
# dynamic check sees).
_RELAYOUT_METHODS = {"t", "transpose", "permute", "movedim", "moveaxis", "swapaxes", "swapdims", "expand",
                     "expand_as", "diagonal", "unfold"}
_RELAYOUT_ATTRS = {"T", "mT", "H", "mH"}
_RELAYOUT_FUNCS = {"torch.t", "torch.transpose", "torch.permute", "torch.movedim", "torch.moveaxis",
                   "torch.swapaxes", "torch.swapdims", "torch.diagonal"}
MAX_CALL_DEPTH = 4


@dataclass(frozen=True)
class Report:
    """One finding of the analysis, for the rule of its flag."""

    flag: Flag
    node: ast.AST
    reason: str


@dataclass(frozen=True)
class _Summary:
    params: tuple[str, ...]  # as the caller passes them (self / ctx left out)
    returned: frozenset[str]  # parameters the function may return, or a view of
    mutated: frozenset[str]  # parameters it modifies in place


def reports(ctx: ScanContext) -> list[Report]:
    """What the entry classes' forward methods do with their inputs, in source-walk order."""
    return ctx.shared("alias_flow", lambda: _AliasFlow(ctx).run())


class AliasFlowRule(Rule):
    """A rule that reports the analysis's findings of its own flag."""

    def finish(self) -> None:
        for report in reports(self.ctx):
            if report.flag is self.flag:
                self.add(report.node, report.reason)


def _inplace_name(name: str) -> bool:
    return name.endswith("_") and not name.startswith("_") and name not in _SAFE_INPLACE


def _bind_args(call: ast.Call, params: tuple[str, ...]) -> Iterator[tuple[ast.AST, str]]:
    """(argument, parameter name) for the arguments of a call that can be matched by position or name."""
    for index, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            break
        if index < len(params):
            yield arg, params[index]
    for kw in call.keywords:
        if kw.arg is not None:
            yield kw.value, kw.arg


def _basic_index(index: ast.AST) -> bool:
    """Basic indexing (slices, integers, None, Ellipsis) returns a view; tensor indices copy."""
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    for item in items:
        if isinstance(item, ast.Slice):
            continue
        if isinstance(item, ast.Constant) and (item.value is None or item.value is Ellipsis
                                               or isinstance(item.value, int)):
            continue
        if isinstance(item, ast.UnaryOp) and isinstance(item.operand, ast.Constant):
            continue
        return False
    return True


class _AliasFlow:
    def __init__(self, ctx: ScanContext):
        self.ctx = ctx
        self.classes = ctx.class_defs()
        self.top = {s.name: s for s in ctx.tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.memo: dict[tuple[int, bool], _Summary] = {}
        self.found: list[Report] = []

    def run(self) -> list[Report]:
        entry = self._entry_classes()
        for cls, fn in self.ctx.methods():
            if cls is not None and fn.name == "forward" and cls.name in entry:
                self._flow(fn, cls.name, bound=True, report=True, depth=0)
        return self.found

    def _entry_classes(self) -> set[str]:
        """ModelNew and the classes of the file it derives from; every class when there is no
        ModelNew (a fragment, whose entry cannot be told)."""
        if "ModelNew" not in self.classes:
            return set(self.classes)
        entry: set[str] = set()
        queue = ["ModelNew"]
        while queue:
            name = queue.pop()
            if name in entry or name not in self.classes:
                continue
            entry.add(name)
            queue.extend(b.id for b in self.classes[name].bases if isinstance(b, ast.Name))
        return entry

    def _flow(self, fn: ast.AST, owner: str | None, bound: bool, report: bool, depth: int) -> _Summary:
        """Which parameters ``fn`` may return (or a view of) and which it modifies in place; with
        ``report``, each return of an input and each modification is a finding."""
        args = fn.args
        positional = [a.arg for a in args.posonlyargs + args.args]
        params = positional[1:] if bound else positional
        alias: dict[str, frozenset[str]] = {p: frozenset({p}) for p in params + [a.arg for a in args.kwonlyargs]}
        relaid: set[str] = set()  # names holding a transposed / permuted / expanded view
        tensorish = {n.value.id for n in walk_body(fn.body)
                     if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
        returned: set[str] = set()
        mutated: set[str] = set()

        def relayout(e: ast.AST | None) -> bool:
            if isinstance(e, ast.Name):
                return e.id in relaid
            if isinstance(e, ast.Attribute):
                return e.attr in _RELAYOUT_ATTRS
            if isinstance(e, ast.Call):
                if isinstance(e.func, ast.Attribute) and e.func.attr in _RELAYOUT_METHODS:
                    return True
                return (self.ctx.qual(e.func) or "") in _RELAYOUT_FUNCS
            return False

        def origins(e: ast.AST | None) -> frozenset[str]:
            if isinstance(e, ast.Name):
                return alias.get(e.id, frozenset())
            if isinstance(e, ast.Attribute):
                return origins(e.value) if e.attr in _VIEW_ATTRS else frozenset()
            if isinstance(e, ast.Subscript):
                return origins(e.value) if _basic_index(e.slice) else frozenset()
            if not isinstance(e, ast.Call):
                return frozenset()
            if isinstance(e.func, ast.Attribute):
                name = e.func.attr
                if name == "contiguous" and relayout(e.func.value):
                    return frozenset()  # a transposed or expanded view is not contiguous: copied
                if name in _VIEW_METHODS or _inplace_name(name):
                    return origins(e.func.value)
            func = self.ctx.qual(e.func) or ""
            if func in _VIEW_FUNCS and e.args:
                return origins(e.args[0])
            callee = self._callee(e, owner, depth)
            if callee is None:
                return frozenset()
            return frozenset().union(*(origins(a) for a, p in _bind_args(e, callee.params) if p in callee.returned))

        def modified(node: ast.AST, what: frozenset[str], reason: str) -> None:
            if what:
                mutated.update(what)
                if report:
                    self.found.append(Report(Flag.INPUT_MUTATED, node, reason))

        for stmt, nodes in statements(fn.body):
            for node in nodes:
                if isinstance(node, ast.Call):
                    self._mutation_call(node, origins, modified)
                    callee = self._callee(node, owner, depth)
                    if callee is not None:
                        for a, p in _bind_args(node, callee.params):
                            if p in callee.mutated:
                                modified(node, origins(a), f"passes an input to {ast.unparse(node.func)}, "
                                                           "which modifies it in place")
                elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store) \
                        and (isinstance(node, ast.Subscript) or node.attr == "data"):
                    modified(node, origins(node.value), "writes into an input tensor")
            if isinstance(stmt, ast.AugAssign):
                target = stmt.target
                if isinstance(target, ast.Subscript):
                    modified(stmt, origins(target.value), "updates an input tensor in place")
                elif isinstance(target, ast.Name) and target.id in tensorish:
                    modified(stmt, alias.get(target.id, frozenset()),
                             f"updates input {target.id} in place ({target.id} op= ...)")
            if isinstance(stmt, ast.Return) and stmt.value is not None:
                values = stmt.value.elts if isinstance(stmt.value, (ast.Tuple, ast.List)) else [stmt.value]
                found = frozenset().union(*(origins(v) for v in values))
                returned.update(found)
                if found and report:
                    self.found.append(Report(Flag.OUTPUT_ALIASES_INPUT, stmt, "returns an input or a view of one"))
            if isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    pairs: list[tuple[ast.AST, ast.AST | None]] = [(target, stmt.value)]
                    if isinstance(target, (ast.Tuple, ast.List)):
                        values = stmt.value.elts if isinstance(stmt.value, (ast.Tuple, ast.List)) and \
                            len(stmt.value.elts) == len(target.elts) else [None] * len(target.elts)
                        pairs = list(zip(target.elts, values))
                    for t, v in pairs:
                        if isinstance(t, ast.Name):
                            alias[t.id] = origins(v) if v is not None else frozenset()
                            (relaid.add if v is not None and relayout(v) else relaid.discard)(t.id)
            elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.AnnAssign)):
                for node in nodes:
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                        alias.pop(node.id, None)
                        relaid.discard(node.id)
        return _Summary(tuple(params), frozenset(returned), frozenset(mutated))

    def _mutation_call(self, node: ast.Call, origins: Callable[[ast.AST | None], frozenset[str]],
                       modified: Callable[[ast.AST, frozenset[str], str], None]) -> None:
        if isinstance(node.func, ast.Attribute):
            name = node.func.attr
            if _inplace_name(name) and origins(node.func.value):
                modified(node, origins(node.func.value), f".{name}() modifies an input tensor in place")
                return
        func = self.ctx.qual(node.func) or ""
        out = keyword(node, "out")
        if out is not None:
            outs = out.elts if isinstance(out, (ast.Tuple, ast.List)) else [out]
            found = frozenset().union(*(origins(e) for e in outs))
            if found:
                modified(node, found, "writes a result into an input tensor (out=...)")
                return
        inplace = keyword(node, "inplace")
        if isinstance(inplace, ast.Constant) and inplace.value is True and node.args and origins(node.args[0]):
            modified(node, origins(node.args[0]), "inplace=True on an input tensor")
            return
        if func.startswith("torch.") and func.endswith("_") and not func.split(".")[-1].startswith("_") \
                and node.args and origins(node.args[0]):
            modified(node, origins(node.args[0]), f"{func} modifies an input tensor in place")

    def _callee(self, call: ast.Call, owner: str | None, depth: int) -> _Summary | None:
        """The summary of a function of this file that ``call`` runs, if it can be told which."""
        if depth >= MAX_CALL_DEPTH:
            return None
        target = self._resolve_call(call, owner)
        if target is None:
            return None
        fn, cls, bound = target
        key = (id(fn), bound)
        if key not in self.memo:
            self.memo[key] = _Summary((), frozenset(), frozenset())  # recursion: assume nothing
            self.memo[key] = self._flow(fn, cls, bound, report=False, depth=depth + 1)
        return self.memo[key]

    def _resolve_call(self, call: ast.Call, owner: str | None) -> tuple[ast.AST, str | None, bool] | None:
        func = call.func
        if isinstance(func, ast.Name):
            fn = self.top.get(func.id)
            return (fn, None, False) if fn is not None else None
        if not isinstance(func, ast.Attribute):
            return None
        receiver = func.value
        if isinstance(receiver, ast.Name) and receiver.id == "self" and owner:
            method = self._method(owner, func.attr)
            if method is not None:
                return method, owner, not is_static(method)
            module = self._submodule_class(owner, func.attr)
            forward = self._method(module, "forward") if module else None
            return (forward, module, True) if forward is not None else None
        if isinstance(receiver, ast.Call) and self.ctx.builtin(receiver.func, "super") and owner in self.classes:
            for base in self.classes[owner].bases:
                if isinstance(base, ast.Name):
                    method = self._method(base.id, func.attr)
                    if method is not None:
                        return method, base.id, True
            return None
        if isinstance(receiver, ast.Name) and receiver.id in self.classes:
            if func.attr == "apply":  # torch.autograd.Function: forward(ctx, *inputs)
                forward = self._method(receiver.id, "forward")
                return (forward, receiver.id, True) if forward is not None else None
            method = self._method(receiver.id, func.attr)
            if method is not None and is_static(method):
                return method, receiver.id, False
        return None

    def _method(self, cls_name: str, name: str, seen: frozenset[str] = frozenset()) -> ast.AST | None:
        cls = self.classes.get(cls_name)
        if cls is None or cls_name in seen:
            return None
        for item in cls.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
                return item
        for base in cls.bases:
            if isinstance(base, ast.Name):
                found = self._method(base.id, name, seen | {cls_name})
                if found is not None:
                    return found
        return None

    def _submodule_class(self, owner: str, attr: str) -> str | None:
        """The class of this file that ``self.<attr> = Class(...)`` makes in the owner's methods."""
        cls = self.classes.get(owner)
        if cls is None:
            return None
        for node in ast.walk(cls):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Name) and node.value.func.id in self.classes):
                continue
            for target in node.targets:
                if isinstance(target, ast.Attribute) and target.attr == attr and isinstance(target.value, ast.Name) \
                        and target.value.id == "self":
                    return node.value.func.id
        return None
