"""The output_aliases_input rule (``hercules.harness.scan.output_aliases_input``): outputs that are an
input or a view of one.

Each FIRES snippet makes the rule, run alone, raise its flag outright; each CLEAN snippet
sits close to the rule without meeting it, and the whole scan finds nothing in it.
"""

from __future__ import annotations

import pytest
from scan_helpers import assert_clean, assert_fires

from hercules.harness.scan.output_aliases_input import OutputAliasesInput


FIRES = {
    "returns_input": ("class M:\n    def forward(self, x):\n        return x\n", "output_aliases_input"),
    "returns_view": ("class M:\n    def forward(self, x):\n        y = x.view(-1)\n        return y, y.sum()\n",
                     "output_aliases_input"),
    "returns_contiguous_input": ("class ModelNew:\n    def forward(self, x):\n        return x.contiguous()\n",
                                 "output_aliases_input"),
    "returns_input_through_submodule": (
        "import torch.nn as nn\nclass Same(nn.Module):\n    def forward(self, t):\n        return t\n"
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.same = Same()\n"
        "    def forward(self, x):\n        return self.same(x)\n", "output_aliases_input"),
    "returns_view_through_helper": (
        "def _flat(t):\n    return t.view(-1)\nclass ModelNew:\n    def forward(self, x):\n        y = _flat(x)\n"
        "        return y\n", "output_aliases_input"),
    "returns_input_through_autograd_function": (
        "import torch\nclass Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, t):\n        return t\n"
        "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return Fn.apply(x)\n",
        "output_aliases_input"),
}


@pytest.mark.parametrize("case", sorted(FIRES))
def test_rule_fires(case):
    code, flag = FIRES[case]
    assert flag == OutputAliasesInput.flag.value
    assert_fires(code, OutputAliasesInput)


CLEAN = {
    "transposed_copy_returned": (
        "class ModelNew:\n    def forward(self, x):\n        y = x.permute(0, 2, 1)\n        z = y.contiguous()\n"
        "        return x.transpose(0, 1).contiguous(), z, x.T.contiguous()\n", "float32"),
    "submodule_views_an_intermediate": (
        # KernelBench's ShuffleNet: the channel shuffle returns a view of what it is given, and what
        # it is given is an intermediate, never the candidate's input.
        "import torch.nn as nn\nclass ChannelShuffle(nn.Module):\n    def forward(self, x):\n"
        "        b, c, h, w = x.size()\n        x = x.view(b, 2, c // 2, h, w)\n        x = x.transpose(1, 2).contiguous()\n"
        "        return x.view(b, -1, h, w)\n"
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.shuffle = ChannelShuffle()\n"
        "    def forward(self, x):\n        return self.shuffle(x * 2)\n", "float32"),
}


@pytest.mark.parametrize("case", sorted(CLEAN))
def test_honest_pattern_is_clean(case):
    assert_clean(*CLEAN[case])
