"""What the names of a candidate hold when its kernel build failed: the abstract values the
reference-fallback rule uses to find the branches taken only then.

A *key* is a name, or an attribute of ``self`` / ``cls`` / a class of the file, across the whole
file. A value is a constant, ``TRUTHY`` / ``FALSY`` when only its truth is known, or ``UNKNOWN``;
each comes with the build sites (indices) it depends on.
"""

from __future__ import annotations

import ast

from hercules.harness.scan.context import ScanContext
from hercules.harness.scan.syntax import COMPOUND, const_str, terminates, unconditional, walk_body

Key = tuple[str, str]  # ("name", id) or ("attr", attribute of self / cls / an own class)
State = dict[Key, tuple[object, frozenset[int]]]


class _Marker:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


UNKNOWN = _Marker("unknown")
TRUTHY = _Marker("truthy")  # only the truth of the value is known
FALSY = _Marker("falsy")
_MARKERS = (UNKNOWN, TRUTHY, FALSY)
_NONE: frozenset[int] = frozenset()


def truth(value: object) -> bool | None:
    if value is TRUTHY:
        return True
    if value is FALSY:
        return False
    if value is UNKNOWN:
        return None
    try:
        return bool(value)
    except Exception:
        return None


def agree(values: list[object]) -> object:
    """The value all of ``values`` share, else their shared truth (TRUTHY/FALSY), else UNKNOWN."""
    if not values or any(v is UNKNOWN for v in values):
        return UNKNOWN
    first = values[0]
    if all(type(v) is type(first) and (v is first or (first not in _MARKERS and v == first)) for v in values):
        return first
    truths = {truth(v) for v in values}
    if truths == {True}:
        return TRUTHY
    if truths == {False}:
        return FALSY
    return UNKNOWN


def key_of(ctx: ScanContext, node: ast.AST | None) -> Key | None:
    """What a name or an attribute of self/cls/an own class refers to, across the file."""
    if isinstance(node, ast.Name):
        return ("name", node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
            node.value.id in ("self", "cls") or node.value.id in ctx.class_names):
        return ("attr", node.attr)
    return None


def bindings(ctx: ScanContext) -> dict[Key, list[ast.AST | None]]:
    """Every value each key is bound to in the file; None for a binding whose value is unknown
    (a parameter, a loop or with target, an unpacking, an augmented assignment ...)."""
    def make() -> dict[Key, list[ast.AST | None]]:
        found: dict[Key, list[ast.AST | None]] = {}
        for node in ctx.nodes:
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, (ast.Store, ast.Del)):
                key = ("name", node.id) if isinstance(node, ast.Name) else ("attr", node.attr)
                parent = ctx.parents.get(node)
                value = None
                if isinstance(parent, ast.Assign) and node in parent.targets:
                    value = parent.value
                elif isinstance(parent, (ast.AnnAssign, ast.NamedExpr)) and parent.target is node:
                    value = parent.value
                found.setdefault(key, []).append(value)
            elif isinstance(node, ast.arg):
                found.setdefault(("name", node.arg), []).append(None)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.setdefault(("name", node.name), []).append(None)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    found.setdefault(("name", (alias.asname or alias.name).split(".")[0]), []).append(None)
            elif isinstance(node, ast.Call) and any(ctx.builtin(node.func, b) for b in ("setattr", "delattr")):
                name = const_str(node.args[1]) if len(node.args) > 1 else None
                if name:
                    found.setdefault(("attr", name), []).append(None)
        return found
    return ctx.shared("fallback_bindings", make)


def agreed_constant(values: list[ast.AST | None], skip: ast.AST | None = None) -> object:
    """The one constant every other binding of a key assigns, or UNKNOWN."""
    constants = []
    for value in values:
        if value is skip:
            continue
        if not isinstance(value, ast.Constant):
            return UNKNOWN
        constants.append(value.value)
    return agree(constants) if constants else UNKNOWN


def none_only_keys(ctx: ScanContext, bound: dict[Key, list[ast.AST | None]]) -> set[Key]:
    """Keys that every binding in the file sets to None (a module that was never built)."""
    for node in ctx.nodes:
        if isinstance(node, ast.Call) and any(ctx.builtin(node.func, b) for b in ("globals", "vars", "exec", "eval")):
            return set()  # bindings made by name cannot be seen
        if isinstance(node, ast.Call) and ctx.builtin(node.func, "setattr") and not (
                len(node.args) > 1 and const_str(node.args[1])):
            return set()
    return {key for key, values in bound.items()
            if values and all(isinstance(v, ast.Constant) and v.value is None for v in values)}


def always_raises(ctx: ScanContext, body: list[ast.stmt], none_only: set[Key]) -> str | None:
    """The None-only name the try body dereferences unconditionally before anything else returns."""
    for stmt in body:
        if isinstance(stmt, COMPOUND):
            return None
        for node in unconditional(stmt):
            target = node.value if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) else (
                node.func if isinstance(node, ast.Call) else None)
            key = key_of(ctx, target)
            if key in none_only:
                return ast.unparse(target) if hasattr(ast, "unparse") else key[1]
        if isinstance(stmt, (ast.Return, ast.Raise)):
            return None
    return None


class FailedBuildValues:
    """Evaluates expressions as they stand when the build failed, from ``state`` (what each key
    holds then, and the build sites it depends on)."""

    def __init__(self, ctx: ScanContext, state: State):
        self.ctx = ctx
        self.state = state

    def propagate(self, bound: dict[Key, list[ast.AST | None]]) -> None:
        """Keys assigned from the state (use_kernel = ext is not None, ext = load_ext()) join it when
        every binding of the key agrees on the value."""
        state = self.state
        primary = set(state)
        for _ in range(4):
            changed = False
            for key, values in bound.items():
                if key in primary or not values or any(v is None for v in values):
                    continue
                results = [self.eval(v) for v in values]
                origin = frozenset().union(*(o for _, o in results))
                agreed = agree([v for v, _ in results])
                if origin and agreed is not UNKNOWN and state.get(key) != (agreed, origin):
                    state[key] = (agreed, origin)
                    changed = True
            if not changed:
                return

    def eval(self, node: ast.AST | None, depth: int = 0) -> tuple[object, frozenset[int]]:
        """The value of an expression when the build failed, with the sites it depends on."""
        if node is None or depth > 6:
            return UNKNOWN, _NONE
        if isinstance(node, ast.Constant):
            return node.value, _NONE
        key = key_of(self.ctx, node)
        if key is not None and key in self.state:
            return self.state[key]
        if isinstance(node, ast.NamedExpr):
            return self.eval(node.value, depth + 1)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            value, origin = self.eval(node.operand, depth + 1)
            known = truth(value)
            return (UNKNOWN if known is None else not known), origin
        if isinstance(node, ast.BoolOp):
            return self._boolop(node, depth)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return self._compare(node, depth)
        if isinstance(node, ast.IfExp):
            test, origin = self.eval(node.test, depth + 1)
            known = truth(test)
            if known is not None:
                value, more = self.eval(node.body if known else node.orelse, depth + 1)
                return value, origin | more
            (a, ao), (b, bo) = self.eval(node.body, depth + 1), self.eval(node.orelse, depth + 1)
            return agree([a, b]), origin | ao | bo
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        return UNKNOWN, _NONE

    def _compare(self, node: ast.Compare, depth: int) -> tuple[object, frozenset[int]]:
        left, lo = self.eval(node.left, depth + 1)
        right, ro = self.eval(node.comparators[0], depth + 1)
        origin = lo | ro
        if isinstance(node.ops[0], (ast.Is, ast.IsNot)) and (
                (left is TRUTHY and right is None) or (left is None and right is TRUTHY)):
            return isinstance(node.ops[0], ast.IsNot), origin  # a truthy value is not None
        if any(v in _MARKERS for v in (left, right)):
            return UNKNOWN, origin
        op = node.ops[0]
        try:
            if isinstance(op, ast.Is):
                return left is right, origin
            if isinstance(op, ast.IsNot):
                return left is not right, origin
            if isinstance(op, ast.Eq):
                return left == right, origin
            if isinstance(op, ast.NotEq):
                return left != right, origin
        except Exception:
            pass
        return UNKNOWN, origin

    def _boolop(self, node: ast.BoolOp, depth: int) -> tuple[object, frozenset[int]]:
        results = [self.eval(v, depth + 1) for v in node.values]
        origin = frozenset().union(*(o for _, o in results))
        stop = not isinstance(node.op, ast.And)  # `and` stops at the first falsy operand, `or` at a truthy one
        exact = True
        for value, _ in results:
            known = truth(value)
            if known is None:
                exact = False
            elif known == stop:
                return (value if exact else (TRUTHY if stop else FALSY)), origin
        return (results[-1][0] if exact else UNKNOWN), origin

    def _call(self, node: ast.Call, depth: int) -> tuple[object, frozenset[int]]:
        ctx = self.ctx
        if ctx.builtin(node.func, "bool") and len(node.args) == 1:
            value, origin = self.eval(node.args[0], depth + 1)
            known = truth(value)
            return (UNKNOWN if known is None else known), origin
        if (ctx.builtin(node.func, "hasattr") or ctx.builtin(node.func, "callable")) and node.args:
            value, origin = self.eval(node.args[0], depth + 1)
            return (False if value is None or value is False else UNKNOWN), origin
        name = node.func.id if isinstance(node.func, ast.Name) else (
            node.func.attr if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
            and node.func.value.id in ("self", "cls") else None)
        fns = ctx.functions.get(name or "", [])
        if len(fns) != 1 or name in ctx.class_names:
            return UNKNOWN, _NONE
        fn = fns[0]
        values, origin = [], _NONE
        for sub in walk_body(fn.body):
            if isinstance(sub, ast.Return):
                value, more = self.eval(sub.value, depth + 1) if sub.value is not None else (None, _NONE)
                values.append(value)
                origin |= more
        if not fn.body or not terminates(fn.body):
            values.append(None)  # falls off the end
        return agree(values), origin
