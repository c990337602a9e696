"""The one walk that serves every rule: strings that are prose are not sources, honest kernels are
clean, exec'd source is scanned at its call, and each node is handed to the rules once."""

from __future__ import annotations

import ast

import pytest
from scan_helpers import assert_clean

from hercules.harness.records import Flag
from hercules.harness.scan import Rule, scan_candidate
from hercules.harness.scan.context import ScanContext
from hercules.harness.scan.finding import Findings
from hercules.harness.scan.walker import MAX_EXEC_DEPTH, scan_tree

CLEAN = {
    "docstring_mentions": ('"""Uses no std::thread, no cudaStreamCreate and no __half; see sys.modules docs."""\n'
                           "def f(x):\n    '''half2 loads would be faster; we keep fp32.'''\n    return x\n", "float32"),
    "triton_launch": ("import torch, triton\nimport triton.language as tl\n@triton.jit\ndef k(x_ptr, n, B: tl.constexpr):\n"
                      "    o = tl.program_id(0) * B + tl.arange(0, B)\n    tl.store(x_ptr + o, tl.load(x_ptr + o, mask=o < n), mask=o < n)\n"
                      "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        out = x.clone()\n"
                      "        k[(triton.cdiv(out.numel(), 1024),)](out, out.numel(), B=1024)\n        return out\n",
                      "float32"),
}


@pytest.mark.parametrize("case", sorted(CLEAN))
def test_honest_pattern_is_clean(case):
    assert_clean(*CLEAN[case])


def test_exec_source_is_scanned_and_reported_at_the_call_as_a_flag():
    code = "x = 1\nexec('import torch\\nfrom torch.utils.cpp_extension import load_inline\\ntry:\\n"
    code += "    ext = load_inline(name=\\'k\\', cpp_sources=\\'\\', functions=[\\'f\\'])\\nexcept Exception:\\n"
    code += "    ext = None\\ntorch.allclose = None')\n"
    findings = {f.flag: f for f in scan_candidate(code)}
    assert findings["monkey_patch"].line == 2 and findings["monkey_patch"].reason.startswith("in exec'd source: ")
    # A fallback there has no line of the candidate's file to trace: a flag outright.
    assert findings["reference_fallback"].line == 2 and findings["reference_fallback"].decisive


def test_exec_nesting_is_followed_only_so_deep():
    def nested(depth: int) -> str:
        return "import torch\ntorch.allclose = None\n" if depth == 0 else f"exec({nested(depth - 1)!r})\n"
    assert {f.flag for f in scan_candidate(nested(MAX_EXEC_DEPTH))} == {"monkey_patch"}
    assert scan_candidate(nested(MAX_EXEC_DEPTH + 1)) == []


class _Census(Rule):
    """Counts what the walker hands a rule, and raises nothing."""

    flag = Flag.MONKEY_PATCH
    static_only_because = "a test rule"
    node_types = (ast.AST,)

    seen: list[ast.AST] = []

    def on_node(self, node: ast.AST) -> None:
        type(self).seen.append(node)


def test_every_node_is_handed_to_a_rule_once_in_walk_order():
    code = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x) + 1\n"
    tree = ast.parse(code)
    _Census.seen = []
    assert scan_tree(tree, "float32", (_Census,)) == []
    assert _Census.seen == list(ast.walk(tree))


def test_the_context_keeps_the_one_walk_and_resolves_aliases():
    tree = ast.parse("import torch as t\nS = t.cuda.Stream\nfrom torch.cuda import Event as E\n")
    ctx = ScanContext(tree, "float32", Findings())
    assert ctx.nodes == list(ast.walk(tree))
    assert ctx.aliases["S"] == "torch.cuda.Stream" and ctx.aliases["E"] == "torch.cuda.Event"
    assert ctx.rooted("torch.cuda") and not ctx.rooted("numpy")
