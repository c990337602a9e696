"""The tensor_subclass rule (``hercules.harness.scan.tensor_subclass``): tensor subclasses and torch
function/dispatch hooks.

Each FIRES snippet makes the rule, run alone, raise its flag outright; each CLEAN snippet
sits close to the rule without meeting it, and the whole scan finds nothing in it.
"""

from __future__ import annotations

import pytest
from scan_helpers import assert_fires

from hercules.harness.scan.tensor_subclass import TensorSubclass


FIRES = {
    "subclass": ("import torch\nclass Lazy(torch.Tensor):\n    pass\n", "tensor_subclass"),
    "subclass_indirect": ("import torch\nclass A(torch.Tensor):\n    pass\nclass B(A):\n    pass\n", "tensor_subclass"),
    "torch_function": ("class W:\n    @classmethod\n    def __torch_function__(cls, f, t, a=(), k=None):\n        pass\n",
                       "tensor_subclass"),
    "torch_dispatch": ("class W:\n    def __torch_dispatch__(self, f, t, a=(), k=None):\n        pass\n", "tensor_subclass"),
    "make_subclass": ("import torch\ndef f(x, C):\n    return torch.Tensor._make_subclass(C, x)\n", "tensor_subclass"),
    "wrapper_subclass": ("import torch\ndef f(x, C):\n    return torch.Tensor._make_wrapper_subclass(C, x.shape)\n",
                         "tensor_subclass"),
    "as_subclass": ("def f(x, C):\n    return x.as_subclass(C)\n", "tensor_subclass"),
    "type_call": ("import torch\nLazy = type('Lazy', (torch.Tensor,), {})\n", "tensor_subclass"),
    "class_assign": ("def f(x, C):\n    x.__class__ = C\n    return x\n", "tensor_subclass"),
}


@pytest.mark.parametrize("case", sorted(FIRES))
def test_rule_fires(case):
    code, flag = FIRES[case]
    assert flag == TensorSubclass.flag.value
    assert_fires(code, TensorSubclass)
