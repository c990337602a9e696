"""Monkey-patching: replacing torch, the timers, the builtins or the comparisons the harness uses,
or hooking the interpreter or PyTorch's dispatch. The integrity snapshot after timing sees
attributes of a known list still replaced; a patch undone before it, a hook on the interpreter or
the dispatcher, or an override in C++ leaves nothing there, so a finding is a flag."""

from __future__ import annotations

import ast

from hercules.harness.records import Flag
from hercules.harness.scan.events import (
    AttributeWrite,
    CallSite,
    EmbeddedSource,
    SubscriptWrite,
    WriteKind,
    setattr_target,
    source_pattern,
)
from hercules.harness.scan.rule import Rule
from hercules.harness.scan.syntax import const_str

MODE_BASES = ("TorchFunctionMode", "TorchDispatchMode", "BaseTorchFunctionMode")
_MONKEY_CALLS = {
    "sys.settrace", "sys.setprofile", "threading.settrace", "threading.setprofile", "threading.settrace_all_threads",
    "sys.addaudithook", "sys.setswitchinterval", "sys.set_asyncgen_hooks", "importlib.reload",
}
_MAPPING_WRITES = ("update", "__setitem__", "setdefault", "pop", "__delitem__", "clear", "popitem")
_CPP_OVERRIDE = source_pattern(
    r"\bTORCH_LIBRARY(?:_IMPL|_FRAGMENT)?\s*\(\s*(?:aten|prim|prims)\b|\bdlsym\s*\(|\bLD_PRELOAD\b"
    r"|\b(?:cudaError_t|CUresult)\s+(?:cudaEventElapsedTime|cudaEventRecord|cudaEventSynchronize"
    r"|cudaStreamSynchronize|cudaDeviceSynchronize|cuEventElapsedTime)\s*\(")


class MonkeyPatch(Rule):
    flag = Flag.MONKEY_PATCH
    static_only_because = ("the integrity snapshot sees a known list of attributes still replaced after timing; "
                           "a patch undone in time, an interpreter or dispatch hook, or a C++ override leaves "
                           "nothing there")
    node_types = (ast.Name, ast.ClassDef)

    def on_reference(self, node, qual: str) -> None:
        if qual.endswith(MODE_BASES) and qual.split(".")[0] == "torch":
            self.add(node, f"uses {qual}: intercepts every torch call")

    def on_node(self, node: ast.AST) -> None:
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                qual = self.ctx.qual(base) or ""
                if qual.endswith(MODE_BASES):
                    self.add(node, f"class {node.name} is a {qual.split('.')[-1]}: intercepts torch calls")
        elif isinstance(node.ctx, ast.Load) and node.id == "__builtins__" and node.id not in self.ctx.aliases:
            parent = self.ctx.parents.get(node)
            if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, (ast.Store, ast.Del)):
                self.add(node, "writes into __builtins__")

    def on_call(self, call: CallSite) -> None:
        node, func = call.node, call.func
        target = setattr_target(self.ctx, call)
        if target is not None and not self.ctx.rooted(target[0]) \
                and isinstance(node.args[0], ast.Name) and node.args[0].id == "__builtins__":
            self.add(node, "sets an attribute of __builtins__")
        if call.attr in _MAPPING_WRITES and self.protected_mapping(node.func.value):
            self.add(node, "rewrites the namespace of a module or of the builtins")
        if func in _MONKEY_CALLS:
            self.add(node, f"calls {func}: hooks into the interpreter")
        if func.startswith("torch.nn.modules.module.register_module_"):
            self.add(node, f"calls {func}: a hook on every module")
        if func.startswith("torch.library.") and node.args:
            namespace = (const_str(node.args[0]) or "").split("::")[0]
            if namespace in ("aten", "prim", "prims"):
                self.add(node, f"{func}({namespace!r}) overrides PyTorch's own operators")

    def on_attribute_write(self, write: AttributeWrite) -> None:
        if write.kind is WriteKind.MODULE_ATTRIBUTE:
            self.add(write.node, f"replaces {write.full}")

    def on_subscript_write(self, write: SubscriptWrite) -> None:
        if write.container != "sys.modules" and self.protected_mapping(write.node.value):
            self.add(write.node, "writes into the namespace of a module or of the builtins")

    def protected_mapping(self, node: ast.AST) -> bool:
        """The builtins' namespace, or the ``__dict__`` / ``vars()`` of an imported module."""
        if isinstance(node, ast.Name) and node.id == "__builtins__":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            return self.ctx.rooted(self.ctx.qual(node.value))
        if isinstance(node, ast.Call) and self.ctx.builtin(node.func, "vars") and node.args:
            return self.ctx.rooted(self.ctx.qual(node.args[0]))
        return False

    def on_source(self, source: EmbeddedSource) -> None:
        for match in _CPP_OVERRIDE.finditer(source.text):
            self.add(source.line_at(match.start()), "CUDA/C++ source overrides PyTorch operators or CUDA runtime "
                                                     f"functions ({match.group(0).strip()[:60]})")
