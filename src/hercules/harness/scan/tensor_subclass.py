"""Tensor subclasses and ``__torch_function__`` / ``__torch_dispatch__``: objects that run code
when used, e.g. a lazy result computed only when the comparison reads it. The output check sees an
output that is not exactly ``torch.Tensor``; a subclass used inside the call that hands back plain
tensors leaves nothing there, so a finding is a flag."""

from __future__ import annotations

import ast

from hercules.harness.records import Flag
from hercules.harness.scan.events import CallSite
from hercules.harness.scan.rule import Rule

SUBCLASS_BASES = {
    "torch.Tensor", "torch._tensor.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter",
    "torch.nn.Buffer", "torch.nn.parameter.Buffer",
}
_HOOKS = ("__torch_function__", "__torch_dispatch__")


class TensorSubclass(Rule):
    flag = Flag.TENSOR_SUBCLASS
    static_only_because = ("the output check sees only the outputs' type; a subclass used inside the call that "
                           "returns plain tensors leaves nothing there")
    node_types = (ast.Name, ast.Attribute, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._tensor_classes: set[str] | None = None

    def on_node(self, node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store) and node.id in _HOOKS:
                self.add(node, f"defines {node.id}")
        elif isinstance(node, ast.Attribute):
            if node.attr in ("_make_subclass", "_make_wrapper_subclass", "as_subclass"):
                self.add(node, f"uses {node.attr}: builds a tensor subclass")
            elif node.attr == "__class__" and isinstance(node.ctx, ast.Store):
                self.add(node, "assigns __class__: changes the type of an object")
        elif isinstance(node, ast.ClassDef):
            for base in node.bases:
                qual = self.ctx.qual(base) or ""
                if qual in SUBCLASS_BASES or (isinstance(base, ast.Name) and base.id in self.tensor_classes()):
                    self.add(node, f"class {node.name} derives from {qual or 'a tensor class'}")
        elif node.name in _HOOKS:
            self.add(node, f"defines {node.name}: a tensor that runs code when used")

    def on_call(self, call: CallSite) -> None:
        node = call.node
        if self.ctx.builtin(node.func, "type") and len(node.args) == 3 and isinstance(node.args[1], (ast.Tuple, ast.List)):
            if any((self.ctx.qual(b) or "") in SUBCLASS_BASES for b in node.args[1].elts):
                self.add(node, "type(...) builds a torch.Tensor subclass")

    def tensor_classes(self) -> set[str]:
        """Classes of the file that derive from a tensor class, directly or through each other."""
        if self._tensor_classes is not None:
            return self._tensor_classes
        names: set[str] = set()
        changed = True
        while changed:
            changed = False
            for cls in self.ctx.class_nodes:
                if cls.name in names:
                    continue
                for base in cls.bases:
                    if (self.ctx.qual(base) or "") in SUBCLASS_BASES or (isinstance(base, ast.Name) and base.id in names):
                        names.add(cls.name)
                        changed = True
                        break
        self._tensor_classes = names
        return names
