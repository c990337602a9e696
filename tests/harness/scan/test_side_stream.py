"""The side_stream rule (``hercules.harness.scan.side_stream``): side streams: stream APIs in Python,
stream creation in CUDA source, and the CUDA-graph recipe that joins its warm-up stream back.

Each FIRES snippet makes the rule, run alone, raise its flag outright; each CLEAN snippet
sits close to the rule without meeting it, and the whole scan finds nothing in it.
"""

from __future__ import annotations

import pytest
from scan_helpers import assert_clean, assert_fires

from hercules.harness.scan.side_stream import SideStream


FIRES = {
    "torch_stream": ("import torch\ns = torch.cuda.Stream()\n", "side_stream"),
    "stream_context": ("import torch\ndef f(x, s):\n    with torch.cuda.stream(s):\n        return x + 1\n", "side_stream"),
    "stream_from_import": ("from torch.cuda import Stream\ns = Stream()\n", "side_stream"),
    "external_stream": ("import torch\ns = torch.cuda.ExternalStream(123)\n", "side_stream"),
    "set_stream": ("import torch\ntorch.cuda.set_stream(None)\n", "side_stream"),
    "cpp_stream_create": ('src = """#include <cuda.h>\nvoid f() { cudaStream_t s; cudaStreamCreate(&s); }\n"""\n',
                          "side_stream"),
    "cpp_stream_pool": ('src = """auto s = at::cuda::getStreamFromPool();\n"""\n', "side_stream"),
    "cpp_nonblocking": ('src = """cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);"""\n', "side_stream"),
}


@pytest.mark.parametrize("case", sorted(FIRES))
def test_rule_fires(case):
    code, flag = FIRES[case]
    assert flag == SideStream.flag.value
    assert_fires(code, SideStream)


CLEAN = {
    "current_stream_cpp": (
        'src = r"""#include <torch/extension.h>\n#include <ATen/cuda/CUDAContext.h>\n'
        '__global__ void k(const float* x, float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x;'
        ' if (i < n) y[i] = x[i] * 2.0f; }\n'
        'torch::Tensor f(torch::Tensor x) { auto y = torch::empty_like(x);\n'
        '  auto stream = at::cuda::getCurrentCUDAStream();\n'
        '  k<<<(x.numel() + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());\n'
        '  C10_CUDA_KERNEL_LAUNCH_CHECK();\n  return y; }\n"""\n'
        'cpp = "torch::Tensor f(torch::Tensor x);"\n'
        'import os\nos.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"\n'
        'from torch.utils.cpp_extension import load_inline\n'
        'ext = load_inline(name="k", cpp_sources=cpp, cuda_sources=src, functions=["f"], verbose=False)\n'
        'import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.f(x.contiguous())\n',
        "float32"),
    "current_stream_python": ("import torch\ndef f(x):\n    s = torch.cuda.current_stream()\n    s.synchronize()\n"
                              "    return x\n", "float32"),
    "cuda_graph_idiom": (
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        if self.graph is None:\n            self.static_x = x.clone()\n            s = torch.cuda.Stream()\n"
        "            s.wait_stream(torch.cuda.current_stream())\n            with torch.cuda.stream(s):\n"
        "                self.static_y = self.body(self.static_x)\n"
        "            torch.cuda.current_stream().wait_stream(s)\n            self.graph = torch.cuda.CUDAGraph()\n"
        "            with torch.cuda.graph(self.graph):\n                self.static_y = self.body(self.static_x)\n"
        "        self.static_x.copy_(x)\n        self.graph.replay()\n        return self.static_y.clone()\n",
        "float32"),
}


@pytest.mark.parametrize("case", sorted(CLEAN))
def test_honest_pattern_is_clean(case):
    assert_clean(*CLEAN[case])
