"""Where a candidate builds its kernels, and the try/except handlers around its forward path: what
the fallback and the swallowed-exception rules both need to tell a fallback from a guard."""

from __future__ import annotations

import ast

from hercules.harness.scan.context import ScanContext
from hercules.harness.scan.syntax import called_name, is_const, walk_body, walk_local

BUILD_CALLS = ("load_inline", "cpp_extension.load", "triton.compile")
# Method names whose call computes a result (a handler that calls one computes the output another way).
_TORCH_METHODS = {
    "matmul", "mm", "bmm", "addmm", "baddbmm", "mv", "conv1d", "conv2d", "conv3d", "linear", "softmax",
    "log_softmax", "sum", "mean", "relu", "gelu", "sigmoid", "tanh", "exp", "layer_norm", "einsum",
    "forward", "__matmul__",
}


def builder_functions(ctx: ScanContext) -> set[str]:
    """Functions of the file that build a kernel, directly or through another such function."""
    def make() -> set[str]:
        builders: set[str] = set()
        changed = True
        while changed:
            changed = False
            for name, fns in ctx.functions.items():
                if name in builders:
                    continue
                if any(isinstance(n, ast.Call) and has_build(ctx, n, builders) for fn in fns for n in walk_body(fn.body)):
                    builders.add(name)
                    changed = True
        return builders
    return ctx.shared("builder_functions", make)


def has_build(ctx: ScanContext, node: ast.AST, builders: set[str]) -> bool:
    """Whether an expression calls a kernel build (load_inline, cpp_extension.load, a builder)."""
    for sub in walk_local(node):
        if not isinstance(sub, ast.Call):
            continue
        if (ctx.qual(sub.func) or "").endswith(BUILD_CALLS):
            return True
        if called_name(sub) in builders:
            return True
    return False


def forward_handlers(ctx: ScanContext, node: ast.Try, builders: set[str]) -> list[ast.ExceptHandler]:
    """The handlers of a try on the forward path that may replace a result: its body calls
    something, builds no kernel and is not an import guard, and the handler does not re-raise.
    A try at import or in __init__ (a device probe, say) replaces no kernel."""
    if not node.handlers:
        return []
    body_nodes = list(walk_body(node.body))
    if not any(isinstance(n, ast.Call) for n in body_nodes):
        return []
    if any(has_build(ctx, n, builders) for n in body_nodes if isinstance(n, ast.Call)):
        return []
    has_import = any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in body_nodes)
    if has_import and all(import_error_only(h) for h in node.handlers):
        return []
    fn = ctx.enclosing_function(node)
    if fn is None or fn not in ctx.forward_reachable():
        return []
    return [h for h in node.handlers if not reraises(h)]


def reraises(handler: ast.ExceptHandler) -> bool:
    return bool(handler.body) and isinstance(handler.body[-1], ast.Raise) and not any(
        isinstance(n, ast.Return) for n in walk_body(handler.body))


def import_error_only(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return all(isinstance(k, ast.Name) and k.id in ("ImportError", "ModuleNotFoundError") for k in kinds)


def catches(handler: ast.ExceptHandler, names: tuple[str, ...]) -> bool:
    if handler.type is None:
        return True
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(k, ast.Name) and k.id in {"Exception", "BaseException", *names} for k in kinds)


def computes(ctx: ScanContext, body: list[ast.stmt]) -> bool:
    """Whether a handler's body computes a result (returns a value, calls torch or the model)."""
    for node in walk_body(body):
        if isinstance(node, ast.Return) and node.value is not None and not is_const(node.value):
            return True
        if _operation(ctx, node):
            return True
    return False


def falls_through_to_fallback(ctx: ScanContext, node: ast.Try) -> bool:
    """Whether a try computes a result and the function around it computes one after it: a
    handler that lets control fall through to there is a fallback (the result computed another
    way), not a swallowed failure. A try around something else (an os.kill) is neither."""
    fn = ctx.enclosing_function(node)
    end = getattr(node, "end_lineno", None) or node.lineno
    return fn is not None and computes(ctx, node.body) and any(
        getattr(sub, "lineno", 0) > end and _operation(ctx, sub) for sub in walk_body(fn.body))


def _operation(ctx: ScanContext, node: ast.AST) -> bool:
    """A matmul, or a call of torch, of a tensor method, of the model's own methods or of super()."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return True
    if not isinstance(node, ast.Call):
        return False
    func = ctx.qual(node.func) or ""
    if func.startswith("torch.") and not func.startswith(("torch.cuda.synchronize", "torch.cuda.empty_cache")):
        return True
    if isinstance(node.func, ast.Attribute) and node.func.attr in _TORCH_METHODS:
        return True
    if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
            and node.func.value.id == "self" and node.func.attr not in ("_log", "log"):
        return True
    return isinstance(node.func, ast.Call) and ctx.builtin(node.func.func, "super")
