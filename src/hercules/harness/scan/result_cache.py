"""Result caches: outputs kept in state that outlives a call (keyed by pointer, id or shape, or
memoised with functools) and handed back instead of computing.

After timing the evaluation writes never-seen values into the very buffers it timed with and
judges every output of passes over fresh values (a cache keyed by address, shape or identity
returns stale outputs there); on a GPU one call on fresh values timed against the same call
repeated shows a cache keyed by content. There these findings are hints: a kernel or config cached
by shape, or a CUDA graph fed the current inputs, stays honest whatever its source looks like. On
a CPU a cache keyed by content escapes the passes (tests/redteam/content_cache.py came out ``ok`` at
18x eager with its static finding a hint), so there a finding stays a flag.
"""

from __future__ import annotations

import ast

from hercules.harness.records import Flag
from hercules.harness.scan.events import EmbeddedSource, source_pattern
from hercules.harness.scan.rule import DynamicCheck, Rule
from hercules.harness.scan.syntax import parameters, returned_names, walk_body

_CACHE_DECORATORS = {"functools.lru_cache", "functools.cache", "functools.cached_property"}
# Methods that hand back (part of) what they were called on: a lookup through them still reads the state.
_PASSTHROUGH = {"clone", "detach", "view", "view_as", "reshape", "contiguous", "to", "float", "expand",
                "expand_as", "get", "pop", "setdefault", "copy", "__getitem__"}
# What makes a key out of an input: its address, storage, shape or version.
_KEY_CALLS = {"data_ptr", "untyped_storage", "storage", "storage_offset", "numel", "size", "stride", "dim",
              "_typed_storage", "nbytes"}
_KEY_ATTRS = {"shape", "_version", "_cdata", "data_ptr", "ndim"}
_CPP_STATIC_HOLD = source_pattern(
    r"\bstatic\s+(?:thread_local\s+)?(?:const\s+)?(?:(?:torch|at)::Tensor\b|(?:void|float|double|half"
    r"|int|\w+_t|scalar_t)\s*(?:const\s*)?\*)")
_CPP_STATIC_MAP = source_pattern(r"\bstatic\s+(?:thread_local\s+)?(?:std::)?(?:unordered_)?map\s*<[^;]*\b(?:torch|at)::Tensor")
_CPP_PTR_COMPARE = source_pattern(r"data_ptr\s*(?:<[^>]*>)?\s*\(\s*\)\s*[!=]=|[!=]=\s*[\w.>\-]*data_ptr")

FRESH_VALUE_PASSES = DynamicCheck(
    "revalidation with never-seen values written into the timed buffers, passes over fresh values whose every "
    "output is judged, and a call on fresh values timed against the same call repeated", frozenset({"cuda"}))


class ResultCache(Rule):
    flag = Flag.RESULT_CACHE
    covered_by = FRESH_VALUE_PASSES

    def finish(self) -> None:
        ctx = self.ctx
        cached = self._cached_functions()
        for cls, fn in ctx.methods():
            if fn not in ctx.output_functions():
                continue
            self._stored_outputs(fn, cls)
            if fn.name in cached and fn.name in ("forward", "__call__"):
                self.add(fn, f"{fn.name} is memoised with functools: outputs reused")
            self._cached_calls(fn, cached)

    def _cached_functions(self) -> set[str]:
        """Functions and attributes of the file memoised with functools."""
        names: set[str] = set()
        for node in self.ctx.nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for deco in node.decorator_list:
                    target = deco.func if isinstance(deco, ast.Call) else deco
                    if (self.ctx.qual(target) or "") in _CACHE_DECORATORS:
                        names.add(node.name)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                call = node.value
                inner = call.func.func if isinstance(call.func, ast.Call) else call.func
                if (self.ctx.qual(inner) or "") in _CACHE_DECORATORS:
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            names.add(target.id)
                        elif isinstance(target, ast.Attribute):
                            names.add(target.attr)
        return names

    def _cached_calls(self, fn: ast.AST, cached: set[str]) -> None:
        if not cached:
            return
        params = set(parameters(fn)) - {"self", "cls"}
        for node in walk_body(fn.body):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else (
                node.func.attr if isinstance(node.func, ast.Attribute) else None)
            if name in cached:
                args = list(node.args) + [k.value for k in node.keywords]
                if any(isinstance(a, ast.Name) and a.id in params for a in args):
                    self.add(node, f"memoised {name} called with the input tensors (cached by id)")

    def _stored_outputs(self, fn: ast.AST, cls: ast.ClassDef | None) -> None:
        """Outputs stored in or returned from persistent state keyed by pointer, id or shape."""
        ctx = self.ctx
        args = fn.args
        params = parameters(fn)
        self_name = params[0] if cls is not None and params else None
        mutable_defaults: set[str] = set()
        positional = args.posonlyargs + args.args
        pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for arg, default in pairs:
            if isinstance(default, (ast.Dict, ast.List, ast.Set)) or (
                    isinstance(default, ast.Call) and isinstance(default.func, ast.Name)
                    and default.func.id in ("dict", "list", "set", "OrderedDict", "defaultdict")):
                mutable_defaults.add(arg.arg)
        body_nodes = list(walk_body(fn.body))
        declared_global = {n for node in body_nodes if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names}
        local_names = {n.id for n in body_nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        persistent_names = (declared_global | mutable_defaults | (
            ctx.module_vars - local_names - ctx.class_names - set(ctx.functions))) - set(ctx.aliases)
        tensor_params = (set(params) | {a.arg for a in (args.vararg, args.kwarg) if a is not None}) - {self_name}

        def chain(e: ast.AST | None) -> str | None:
            """'self._cache' for self._cache[k], self._cache.get(k), type(self)._cache ...; None if not persistent."""
            while True:
                if isinstance(e, ast.Subscript):
                    e = e.value
                elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in _PASSTHROUGH:
                    e = e.func.value
                else:
                    break
            parts: list[str] = []
            while isinstance(e, ast.Attribute):
                parts.append(e.attr)
                e = e.value
            if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "type" and e.args:
                e = e.args[0]
            if isinstance(e, ast.Name) and (e.id in (self_name, "cls") or e.id in persistent_names
                                            or (e.id in ctx.class_names and parts)):
                root = "self" if e.id in (self_name, "cls") or e.id in ctx.class_names else e.id
                return ".".join([root, *reversed(parts)])
            return None

        key_names: set[str] = set()
        lookups: dict[str, set[str]] = {}

        def has_key(e: ast.AST | None) -> bool:
            if e is None:
                return False
            for sub in ast.walk(e):
                if isinstance(sub, ast.Call):
                    if isinstance(sub.func, ast.Attribute) and sub.func.attr in _KEY_CALLS:
                        return True
                    if isinstance(sub.func, ast.Name) and sub.func.id in ("id", "hash") and sub.func.id not in ctx.bound:
                        return True
                elif isinstance(sub, ast.Attribute) and sub.attr in _KEY_ATTRS:
                    return True
                elif isinstance(sub, ast.Name) and (sub.id in key_names or sub.id in tensor_params):
                    return True
            return False

        def sources(e: ast.AST | None) -> set[str]:
            """The persistent state an expression reads its value from (empty: a fresh value)."""
            if e is None:
                return set()
            if isinstance(e, (ast.Tuple, ast.List)):
                return set().union(*(sources(x) for x in e.elts)) if e.elts else set()
            if isinstance(e, ast.Name):
                if e.id in lookups:
                    return lookups[e.id]
                return {e.id} if e.id in persistent_names else set()
            if isinstance(e, (ast.Attribute, ast.Subscript)) or (
                    isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in _PASSTHROUGH):
                found = chain(e)
                if found:
                    return {found}
                inner = e.func.value if isinstance(e, ast.Call) else e.value
                return sources(inner)
            return set()

        assigns = [n for n in body_nodes if isinstance(n, ast.Assign)]
        for _ in range(3):
            for node in assigns:
                names = [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
                if has_key(node.value):
                    key_names.update(names)
                found = sources(node.value)
                if found:
                    for name in names:
                        lookups.setdefault(name, set()).update(found)

        replays = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "replay"
                      for n in body_nodes) and any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "copy_"
            and chain(n.func.value) and n.args and not chain(n.args[0]) for n in body_nodes)
        if replays:
            return  # a CUDA graph fed the current inputs: recomputed on every call

        returns = [n for n in body_nodes if isinstance(n, ast.Return) and n.value is not None]
        returned = returned_names(fn)
        returned_sources: set[str] = set()
        for r in returns:
            returned_sources |= sources(r.value)

        def reads_back(container: str) -> bool:
            return any(s == container or s.startswith(container + ".") for s in returned_sources)

        # persistent[key] = value, keyed by pointer/id/shape, where the value is what is returned
        for node in body_nodes:
            stores: list[tuple[ast.AST, ast.AST, ast.AST, ast.AST | None]] = []
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Subscript):
                        stores.append((node, target.value, target.slice, node.value))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("setdefault", "__setitem__") and node.args:
                stores.append((node, node.func.value, node.args[0], node.args[1] if len(node.args) > 1 else None))
            for where, container_node, key, value in stores:
                container = chain(container_node)
                if container is None or not has_key(key):
                    continue
                value_names = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)} if value is not None else set()
                if value_names & returned or reads_back(container):
                    self.add(where, "stores outputs in persistent state keyed by pointer, id or shape")

        # if <check on saved state>: return <saved state>
        for node in body_nodes:
            if not isinstance(node, ast.If):
                continue
            if not any(chain(n) for n in ast.walk(node.test) if isinstance(n, (ast.Name, ast.Attribute, ast.Subscript))):
                continue
            for branch in (node.body, node.orelse):
                for sub in walk_body(branch):
                    if isinstance(sub, ast.Return) and sources(sub.value):
                        self.add(sub, "returns a stored result when a check on saved state passes")
                        break

    def on_source(self, source: EmbeddedSource) -> None:
        if _CPP_PTR_COMPARE.search(source.text):
            for match in _CPP_STATIC_HOLD.finditer(source.text):
                self.add(source.line_at(match.start()),
                         "CUDA/C++ source keeps a static tensor/pointer and compares input pointers (cached result)")
        for match in _CPP_STATIC_MAP.finditer(source.text):
            self.add(source.line_at(match.start()), "CUDA/C++ source keeps tensors in a static map")
