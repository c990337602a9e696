"""The facts about one candidate file that every rule shares, gathered once before the rules' walk:
who is whose parent, what each imported name stands for, which names the file binds, its functions
and classes, and which functions a forward call may run.

Names resolve to dotted paths (``qual``): ``t.cuda.Stream`` is ``torch.cuda.Stream`` after
``import torch as t``, and so is ``Stream`` after ``from torch.cuda import Stream`` or ``S`` after
``S = torch.cuda.Stream``. A path is *rooted* when it starts at a module the file imports.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from typing import TypeVar

from hercules.harness.scan.finding import Findings
from hercules.harness.scan.syntax import FUNCTION_NODES, assigned_names, const_str, walk_body

Function = ast.FunctionDef | ast.AsyncFunctionDef
T = TypeVar("T")


class ScanContext:
    def __init__(self, tree: ast.Module, problem_dtype: str, findings: Findings, depth: int = 0):
        self.tree = tree
        self.problem_dtype = problem_dtype
        self.depth = depth  # how many exec'd sources deep this file is
        self.findings = findings
        self.parents: dict[ast.AST, ast.AST] = {}
        self.aliases: dict[str, str] = {}
        self.module_roots: set[str] = {"__builtins__"}
        self.bound: set[str] = set()  # every name the file binds anywhere
        self.module_vars: set[str] = set()  # names bound at module level
        self.class_names: set[str] = set()  # module-level classes
        self.class_nodes: list[ast.ClassDef] = []  # every class, in walk order
        self.functions: dict[str, list[Function]] = {}
        self.nodes: list[ast.AST] = []  # every node, in ast.walk order: the one walk, kept
        self._shared: dict[str, object] = {}
        self._index()
        self._reachable: set[ast.AST] | None = None
        self._outputs: set[ast.AST] | None = None

    # ---- the index ---------------------------------------------------------------------------------
    def _index(self) -> None:
        assignments: list[ast.Assign] = []
        for node in ast.walk(self.tree):
            self.nodes.append(node)
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                        self.module_roots.add(alias.name.split(".")[0])
                    else:
                        root = alias.name.split(".")[0]
                        self.aliases[root] = root
                        self.module_roots.add(root)
            elif isinstance(node, ast.ImportFrom):
                module = "." * (node.level or 0) + (node.module or "")
                self.module_roots.add(module.split(".")[0] if module and not node.level else module or ".")
                for alias in node.names:
                    if alias.name != "*":
                        self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
            elif isinstance(node, FUNCTION_NODES):
                self.bound.add(node.name)
                self.functions.setdefault(node.name, []).append(node)
                args = node.args
                for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                    if a is not None:
                        self.bound.add(a.arg)
            elif isinstance(node, ast.ClassDef):
                self.bound.add(node.name)
                self.class_nodes.append(node)
            elif isinstance(node, ast.Call) and node.args and const_str(node.args[0]) and (
                    (isinstance(node.func, ast.Name) and node.func.id == "__import__")
                    or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")):
                self.module_roots.add(const_str(node.args[0]).split(".")[0])  # modules imported by name
            elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                self.bound.add(node.id)
            elif isinstance(node, ast.arg):
                self.bound.add(node.arg)
            if isinstance(node, ast.Assign):
                assignments.append(node)
        for stmt in self.tree.body:
            if isinstance(stmt, ast.ClassDef):
                self.class_names.add(stmt.name)
            self.module_vars.update(assigned_names(stmt))
        # Simple aliases of modules and their attributes (t = torch; Event = torch.cuda.Event);
        # twice, so an alias of an alias resolves.
        for _ in range(2):
            for node in assignments:
                if (len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                        and isinstance(node.value, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))):
                    qual = self.qual(node.value)  # calls resolve only for import_module / getattr
                    if qual and self.rooted(qual):
                        self.aliases[node.targets[0].id] = qual

    def shared(self, key: str, make: Callable[[], T]) -> T:
        """An analysis several rules read, made once per file on first use."""
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]  # type: ignore[return-value]

    # ---- names -------------------------------------------------------------------------------------
    def qual(self, node: ast.AST | None) -> str | None:
        """The dotted path an expression names, through imports and simple aliases; None if none."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.qual(node.value)
            return None if base is None else f"{base}.{node.attr}"
        if isinstance(node, ast.Call):
            func = self.qual(node.func)
            if func in ("importlib.import_module", "__import__") and node.args:
                return const_str(node.args[0])
            if func == "getattr" and len(node.args) >= 2 and const_str(node.args[1]):
                base = self.qual(node.args[0])
                return None if base is None else f"{base}.{const_str(node.args[1])}"
            return None
        if isinstance(node, ast.Subscript) and self.qual(node.value) == "sys.modules":
            return const_str(node.slice)
        return None

    def rooted(self, qual: str | None) -> bool:
        return bool(qual) and qual.split(".")[0] in self.module_roots

    def builtin(self, node: ast.AST, name: str) -> bool:
        """Whether ``node`` is the builtin ``name`` (not rebound by the file)."""
        return isinstance(node, ast.Name) and node.id == name and name not in self.bound

    def is_called(self, node: ast.AST) -> bool:
        parent = self.parents.get(node)
        return isinstance(parent, ast.Call) and parent.func is node

    def enclosing_function(self, node: ast.AST) -> ast.AST | None:
        current = self.parents.get(node)
        while current is not None and not isinstance(current, FUNCTION_NODES):
            current = self.parents.get(current)
        return current

    # ---- functions and classes ------------------------------------------------------------------
    def methods(self) -> Iterator[tuple[ast.ClassDef | None, Function]]:
        """Every method (with its class), then every module-level function (class None)."""
        for node in self.class_nodes:
            for item in node.body:
                if isinstance(item, FUNCTION_NODES):
                    yield node, item
        for stmt in self.tree.body:
            if isinstance(stmt, FUNCTION_NODES):
                yield None, stmt

    def class_defs(self) -> dict[str, ast.ClassDef]:
        return {node.name: node for node in self.class_nodes}

    def _entry_methods(self) -> list[Function]:
        """Every forward / __call__ of a class: where a call of the candidate starts."""
        return [fn for cls, fn in self.methods() if cls is not None and fn.name in ("forward", "__call__")]

    def forward_reachable(self) -> set[ast.AST]:
        """Functions a forward call may run: every forward / __call__ and, transitively, the
        functions and methods of the file they call by name (a name matches each def of it)."""
        if self._reachable is not None:
            return self._reachable
        reached: set[ast.AST] = set()
        queue = self._entry_methods()
        while queue:
            fn = queue.pop()
            if fn in reached:
                continue
            reached.add(fn)
            for sub in walk_body(fn.body):
                if isinstance(sub, ast.Call):
                    name = sub.func.id if isinstance(sub.func, ast.Name) else (
                        sub.func.attr if isinstance(sub.func, ast.Attribute) else None)
                    queue.extend(self.functions.get(name or "", []))
                    if isinstance(sub.func, ast.Attribute) and sub.func.attr == "apply":
                        queue.extend(self.functions.get("forward", []))  # torch.autograd.Function
        self._reachable = reached
        return reached

    def output_functions(self) -> set[ast.AST]:
        """Functions whose result becomes a forward call's output: forward / __call__ and the
        functions of the file whose calls they return (directly or through a returned name)."""
        if self._outputs is not None:
            return self._outputs
        by_name: dict[str, list[ast.AST]] = {}
        for _, fn in self.methods():
            by_name.setdefault(fn.name, []).append(fn)
        outputs: set[ast.AST] = set()
        queue = self._entry_methods()
        while queue:
            fn = queue.pop()
            if fn in outputs:
                continue
            outputs.add(fn)
            returned: set[str] = set()
            for node in walk_body(fn.body):
                if isinstance(node, ast.Return) and node.value is not None:
                    returned.update(n.id for n in ast.walk(node.value) if isinstance(n, ast.Name))
            exprs: list[ast.AST] = [n.value for n in walk_body(fn.body) if isinstance(n, ast.Return) and n.value]
            for n in walk_body(fn.body):
                if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id in returned for t in n.targets):
                    exprs.append(n.value)
            for expr in exprs:
                for sub in ast.walk(expr):
                    if isinstance(sub, ast.Call):
                        name = None
                        if isinstance(sub.func, ast.Name):
                            name = sub.func.id
                        elif isinstance(sub.func, ast.Attribute) and isinstance(sub.func.value, ast.Name) \
                                and sub.func.value.id in ("self", "cls"):
                            name = sub.func.attr
                        queue.extend(by_name.get(name or "", []))
        self._outputs = outputs
        return outputs
