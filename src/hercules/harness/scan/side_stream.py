"""Side streams: work launched on a stream other than the one the events time, so the clock stops
before the work is done.

Static evidence: a reference to a stream API in Python, or stream creation / switching in CUDA
source. PyTorch's documented CUDA-graph recipe warms up on a side stream and joins it back before
capture; a file that captures a graph and joins the current stream to another is that recipe, not
hidden work. On a GPU the wall/event cross-check (the parent's clock against the events, with the
profiler's list of streams) judges the running candidate, so there these findings are hints; on a
CPU no stream exists to be checked, and a finding stays a flag.
"""

from __future__ import annotations

import ast

from hercules.harness.records import Flag
from hercules.harness.scan.events import EmbeddedSource, source_pattern
from hercules.harness.scan.rule import DynamicCheck, Rule

SIDE_STREAM_NAMES = {
    "torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream", "torch.cuda.ExternalStream",
    "torch.cuda.streams.Stream", "torch.cuda.streams.ExternalStream", "torch.cuda.StreamContext",
    "torch.Stream", "torch.cuda.set_current_stream", "torch.cuda.Stream.priority_range",
}
_GRAPH_NAMES = ("torch.cuda.CUDAGraph", "torch.cuda.graph", "torch.cuda.graphs.CUDAGraph",
                "torch.cuda.make_graphed_callables")
_CURRENT_STREAM = ("torch.cuda.current_stream", "torch.cuda.default_stream")
_CPP_SIDE_STREAM = source_pattern(
    r"\bcudaStreamCreate\w*|\bcuStreamCreate\w*|\bgetStreamFromPool\b|\bgetStreamFromExternal\b"
    r"|\bcudaStreamNonBlocking\b|\bcudaStreamPerThread\b|\bsetCurrentCUDAStream\b")

WALL_EVENT_CROSS_CHECK = DynamicCheck(
    "the parent's wall clock against the candidate's events after a device-wide synchronise, with the "
    "profiler's streams", frozenset({"cuda"}))


class SideStream(Rule):
    flag = Flag.SIDE_STREAM
    covered_by = WALL_EVENT_CROSS_CHECK
    node_types = (ast.Attribute, ast.Name, ast.Call)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.uses: list[tuple[ast.AST, str]] = []
        self.captures = False  # a CUDA graph is captured
        self.joins = False  # the current stream waits on another

    def on_reference(self, node: ast.AST, qual: str) -> None:
        if qual in SIDE_STREAM_NAMES:
            self.uses.append((node, f"uses {qual}: work on a stream other than the timed one"))

    def on_node(self, node: ast.AST) -> None:
        if isinstance(node, (ast.Attribute, ast.Name)):
            if (self.ctx.qual(node) or "") in _GRAPH_NAMES:
                self.captures = True
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "wait_stream":
            receiver = node.func.value
            if isinstance(receiver, ast.Call) and (self.ctx.qual(receiver.func) or "") in _CURRENT_STREAM:
                self.joins = True

    def finish(self) -> None:
        if self.captures and self.joins:
            return  # the graph-capture recipe: warmed up on a side stream that is joined back
        for node, reason in self.uses:
            self.add(node, reason)

    def on_source(self, source: EmbeddedSource) -> None:
        for match in _CPP_SIDE_STREAM.finditer(source.text):
            self.add(source.line_at(match.start()),
                     f"CUDA source uses a stream other than PyTorch's current one ({match.group(0).strip()[:60]})")
