"""Replies of the workers parsed into records: what a pack reply keeps and what it refuses."""

import pytest

from hercules.harness.protocol import BurstReply, ProtocolError

LAYOUT = {"medium": "memfd", "slots": []}


def _burst(**fields):
    return {"layout": LAYOUT, "types": ["torch.Tensor"], "fds": 1, "enqueue_ms": 0.1, "executed_lines": [], **fields}


def test_a_burst_of_hundreds_of_calls_keeps_every_outputs_type_name():
    # A fresh pass on the GPU returns up to 256 calls' outputs; the reference refuses a pack whose
    # type names do not match its slots one for one.
    reply = BurstReply.parse(_burst(types=["torch.Tensor"] * 300))
    assert len(reply.types) == 300


@pytest.mark.parametrize("fields", [{"fds": 2}, {"layout": "x"}, {"enqueue_ms": -1.0}, {"enqueue_ms": float("nan")},
                                    {"types": [1, 2]}, {"executed_lines": ["3"]}])
def test_malformed_burst_replies_are_protocol_errors(fields):
    with pytest.raises(ProtocolError):
        BurstReply.parse(_burst(**fields))
