"""Small questions about Python syntax trees that several rules ask (no rule's knowledge here)."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

FUNCTION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef)
SCOPE_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef,
            ast.AsyncFunctionDef, ast.ClassDef) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ()) + (
            (ast.Match,) if hasattr(ast, "Match") else ())
TRY_NODES = (ast.Try,) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())
# Expressions whose parts are not all evaluated whenever the expression is.
LAZY = (ast.IfExp, ast.BoolOp, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)

_COMPOUND_HEADERS = {
    ast.If: ("test",), ast.While: ("test",), ast.For: ("target", "iter"), ast.AsyncFor: ("target", "iter"),
    ast.With: ("items",), ast.AsyncWith: ("items",), ast.Try: (),
}


def const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def is_const(node: ast.AST | None) -> bool:
    if node is None or isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(is_const(e) for e in node.elts)
    if isinstance(node, ast.UnaryOp):
        return is_const(node.operand)
    return False


def keyword(call: ast.Call, name: str) -> ast.AST | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def walk_local(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk that does not enter nested functions, lambdas or classes (the node itself excepted)."""
    stack = [node]
    first = True
    while stack:
        current = stack.pop()
        yield current
        if not first and isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        first = False
        stack.extend(reversed(list(ast.iter_child_nodes(current))))


def walk_body(stmts: Iterable[ast.stmt]) -> Iterator[ast.AST]:
    for stmt in stmts:
        if isinstance(stmt, SCOPE_NODES):
            continue
        yield from walk_local(stmt)


def statements(stmts: Iterable[ast.stmt]) -> Iterator[tuple[ast.stmt, list[ast.AST]]]:
    """Statements in source order (into blocks, not into nested defs), each with the expression
    nodes that belong to it alone (a compound statement's header, a simple statement's all)."""
    for stmt in stmts:
        if isinstance(stmt, SCOPE_NODES):
            continue
        headers = None
        for kind, fields in _COMPOUND_HEADERS.items():
            if isinstance(stmt, kind):
                headers = fields
                break
        if headers is None and hasattr(ast, "TryStar") and isinstance(stmt, ast.TryStar):
            headers = ()
        if headers is None:
            yield stmt, list(walk_local(stmt))
            continue
        nodes: list[ast.AST] = []
        for name in headers:
            value = getattr(stmt, name)
            for item in value if isinstance(value, list) else [value]:
                nodes.extend(walk_local(item))
        yield stmt, nodes
        for block in ("body", "orelse", "finalbody"):
            yield from statements(getattr(stmt, block, []) or [])
        for handler in getattr(stmt, "handlers", []) or []:
            yield from statements(handler.body)


def unconditional(stmt: ast.stmt) -> Iterator[ast.AST]:
    """Nodes of a simple statement that are evaluated whenever it runs (not those inside a
    conditional expression, a short-circuit operator, a lambda or a comprehension)."""
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, LAZY):
            continue
        stack.extend(ast.iter_child_nodes(node))


def span(stmts: list[ast.stmt]) -> tuple[int, int]:
    """The inclusive lines of a block, its first statement's decorators included."""
    first = min([stmts[0].lineno] + [d.lineno for d in getattr(stmts[0], "decorator_list", [])])
    return first, max(getattr(s, "end_lineno", None) or s.lineno for s in stmts)


def runs(lines: list[int]) -> list[tuple[int, int]]:
    """Sorted line numbers as inclusive ranges of consecutive lines."""
    found: list[tuple[int, int]] = []
    for line in lines:
        if found and line == found[-1][1] + 1:
            found[-1] = (found[-1][0], line)
        else:
            found.append((line, line))
    return found


def terminates(stmts: list[ast.stmt]) -> bool:
    """Whether a block always leaves through return or raise (so what follows it is its else)."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    return isinstance(last, ast.If) and terminates(last.body) and terminates(last.orelse)


def assigned_names(stmt: ast.stmt) -> list[str]:
    """Names bound by an assignment statement (plain, annotated or augmented)."""
    names: list[str] = []
    targets: list[ast.AST] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                names.append(node.id)
    return names


def returned_names(fn: ast.AST) -> set[str]:
    """Names that appear in a function's return expressions."""
    names: set[str] = set()
    for node in walk_body(fn.body):
        if isinstance(node, ast.Return) and node.value is not None:
            names.update(n.id for n in ast.walk(node.value) if isinstance(n, ast.Name))
    return names


def parameters(fn: ast.AST) -> list[str]:
    """Positional-only, positional and keyword-only parameter names, in order."""
    args = fn.args
    return [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]


def is_static(fn: ast.AST) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in getattr(fn, "decorator_list", []))


def called_name(call: ast.Call, receivers: tuple[str, ...] = ("self", "cls")) -> str | None:
    """``f`` of ``f(...)`` or of ``self.f(...)`` / ``cls.f(...)``; None otherwise."""
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) \
            and call.func.value.id in receivers:
        return call.func.attr
    return None
