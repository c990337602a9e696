"""Reaching for the problem: the reference's module, names, frames or files, the environment, or
other processes' memory, to copy the expected output or edit the problem's sizes. What a candidate
reads leaves no trace in its outputs or its times, so no check of the running candidate sees it
(the sandbox narrows what there is to read): a finding is a flag."""

from __future__ import annotations

import ast

from hercules.harness.records import Flag
from hercules.harness.scan.events import (
    AttributeWrite,
    CallSite,
    EmbeddedSource,
    EnvAccess,
    SubscriptWrite,
    WriteKind,
    source_pattern,
)
from hercules.harness.scan.rule import Rule
from hercules.harness.scan.syntax import const_str, keyword

PROBLEM_NAMES = {"Model", "get_inputs", "get_init_inputs"}
_PROBLEM_REFS = {
    "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "inspect.stack", "inspect.currentframe", "inspect.getouterframes", "inspect.getinnerframes",
    "inspect.trace", "inspect.getmodule", "inspect.getsource", "inspect.getsourcelines",
    "inspect.getsourcefile", "inspect.getfile", "inspect.getmembers", "inspect.getframeinfo",
    "sys._getframe", "sys._current_frames", "sys.argv", "sys.orig_argv",
    "traceback.extract_stack", "traceback.walk_stack", "traceback.format_stack",
    "torch.load", "numpy.load", "numpy.fromfile", "numpy.loadtxt", "numpy.genfromtxt", "numpy.memmap",
    "pickle.load", "pickle.loads", "pickle.Unpickler", "marshal.load", "marshal.loads",
    "io.open", "os.open", "codecs.open", "builtins.open", "os.listdir", "os.scandir", "os.walk",
    "glob.glob", "glob.iglob", "pathlib.Path.read_text", "pathlib.Path.read_bytes", "pathlib.Path.open",
}
_PROBLEM_ROOTS = {"__main__", "linecache", "socket", "urllib", "http", "requests", "mmap", "shelve", "ftplib"}
_FRAME_ATTRS = {"f_back", "f_globals", "f_locals", "tb_frame", "gi_frame", "cr_frame", "ag_frame",
                "__globals__", "__subclasses__", "tb_next"}
_FILE_METHODS = {"read_text", "read_bytes", "iterdir", "rglob", "glob"}
_PROBLEM_STRINGS = {"get_inputs", "get_init_inputs", "hercules_problem", "__main__", "HERCULES"}
_CPP_OUTSIDE = source_pattern(
    r"\bcudaIpcOpenMemHandle\b|\bcuIpcOpenMemHandle\b|\bcudaIpcGetMemHandle\b|\bfopen\s*\("
    r"|\bstd::[io]?fstream\b|\bgetenv\s*\(|/proc/|/dev/shm|\bshm_open\b|\bmmap\s*\(")


class ProblemEdit(Rule):
    flag = Flag.PROBLEM_EDIT
    static_only_because = ("what a candidate reads (the problem's module, frames, files, the environment) leaves "
                           "no trace in its outputs or its times")
    node_types = (ast.ImportFrom, ast.Name, ast.Attribute, ast.Constant)

    def on_node(self, node: ast.AST) -> None:
        ctx = self.ctx
        if isinstance(node, ast.ImportFrom):
            module = "." * (node.level or 0) + (node.module or "")
            for alias in node.names:
                if alias.name in PROBLEM_NAMES:
                    self.add(node, f"imports {alias.name} from {module or '.'}")
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load) and node.id not in ctx.aliases and node.id in PROBLEM_NAMES \
                    and node.id not in ctx.bound:
                self.add(node, f"uses {node.id} without defining it (the problem's namespace)")
        elif isinstance(node, ast.Attribute):
            if node.attr in _FRAME_ATTRS:
                self.add(node, f"uses .{node.attr}: walks frames, globals or classes of other code")
        elif isinstance(node.value, str) and node.value in _PROBLEM_STRINGS:
            parent = ctx.parents.get(node)
            if isinstance(parent, ast.Compare) and any(
                    isinstance(n, ast.Name) and n.id == "__name__" for n in [parent.left, *parent.comparators]):
                return  # if __name__ == "__main__":
            self.add(node, f"looks up {node.value!r} (the problem's names or module)")

    def on_reference(self, node: ast.AST, qual: str) -> None:
        root = qual.split(".")[0]
        if qual == "sys.modules" or qual.startswith("sys.modules."):
            self.add(node, "reads sys.modules (other modules, the problem's included)")
        if root in _PROBLEM_ROOTS or qual in _PROBLEM_REFS:
            self.add(node, f"uses {qual}: reaches outside its inputs for the problem")
        if self.ctx.rooted(qual) and qual.split(".")[-1] in PROBLEM_NAMES and root not in ("torch", "triton"):
            self.add(node, f"reaches for {qual}")

    def on_call(self, call: CallSite) -> None:
        if self.ctx.builtin(call.node.func, "open") and not _writes_only(call.node):
            self.add(call.node, "opens a file")
        if call.attr in _FILE_METHODS and not call.func.startswith("triton"):
            self.add(call.node, f"calls .{call.attr}(): reads files or folders")

    def on_env(self, access: EnvAccess) -> None:
        if not access.write and not access.allowed:
            what = f"environment variable {access.key}" if access.key else "the environment"
            self.add(access.node, f"reads {what}")

    def on_attribute_write(self, write: AttributeWrite) -> None:
        if write.kind is WriteKind.SYS_MODULES:
            self.add(write.node, f"writes {write.full}")

    def on_subscript_write(self, write: SubscriptWrite) -> None:
        if write.container == "sys.modules":
            self.add(write.node, "writes into sys.modules")

    def on_source(self, source: EmbeddedSource) -> None:
        for match in _CPP_OUTSIDE.finditer(source.text):
            self.add(source.line_at(match.start()), "CUDA/C++ source reaches outside its inputs (files, environment "
                                                     f"or other processes' memory: {match.group(0).strip()[:60]})")


def _writes_only(call: ast.Call) -> bool:
    """``open(path, "w")`` and the like: a file made (CUDA-L1 kernels write their sources before a
    build), nothing read from it."""
    mode = const_str(call.args[1] if len(call.args) > 1 else keyword(call, "mode"))
    return mode is not None and bool(set(mode) & set("wax")) and "+" not in mode and "r" not in mode
