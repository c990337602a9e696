"""Exceptions swallowed on the forward path: a handler (or ``contextlib.suppress``) that hides a
kernel's failure and returns whatever the output buffer held. The worker reports an exception
raised and hidden inside a traced forward call; one that is not raised in the trials leaves nothing
there, so a finding is a flag."""

from __future__ import annotations

import ast

from hercules.harness.records import Flag
from hercules.harness.scan.builds import builder_functions, computes, falls_through_to_fallback, forward_handlers
from hercules.harness.scan.rule import Rule
from hercules.harness.scan.syntax import TRY_NODES, walk_body


class SwallowedException(Rule):
    flag = Flag.SWALLOWED_EXCEPTION
    static_only_because = ("the worker reports an exception hidden inside a traced forward call; one not raised "
                           "in the trials leaves nothing there")

    def finish(self) -> None:
        ctx = self.ctx
        builders = builder_functions(ctx)
        for node in ctx.nodes:
            if not isinstance(node, TRY_NODES):
                continue
            if falls_through_to_fallback(ctx, node):
                continue  # its handlers fall through to a fallback (the reference_fallback rule's)
            for handler in forward_handlers(ctx, node, builders):
                # A handler that computes is a fallback (its own rule); one that does not, in a
                # function whose result is the output, hides the failure.
                if not computes(ctx, handler.body) and ctx.enclosing_function(node) in ctx.output_functions():
                    self.add(handler, "exception caught and ignored on the forward path")
        for _, fn in ctx.methods():
            if fn not in ctx.output_functions():
                continue
            for node in walk_body(fn.body):
                if isinstance(node, (ast.With, ast.AsyncWith)):
                    for item in node.items:
                        expr = item.context_expr
                        if isinstance(expr, ast.Call) and ctx.qual(expr.func) == "contextlib.suppress":
                            self.add(node, "contextlib.suppress on the forward path")
