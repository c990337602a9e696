"""Messages between the parent and its workers: JSON where they are plain, torch.save otherwise,
and nothing a hostile worker sends makes the parent run code or crash."""

import io
import os
import pickle

import pytest
import torch

from hercules.harness.codec import JSON_TAG, TORCH_TAG, decode, encode


def _layout_reply(outputs: int) -> dict:
    slots = [[[384, 384], "float32", i * 589824, 589824] for i in range(outputs)]
    return {"enqueue_ms": 0.01, "executed_lines": [], "types": ["torch.Tensor"] * outputs, "fds": 1, "ok": True,
            "layout": {"slots": slots, "values": [None] * outputs, "size": outputs * 589824, "medium": "memfd"},
            "worker_seconds": 0.25}


def test_a_timed_reply_travels_as_json_and_comes_back_equal():
    reply = _layout_reply(227)
    payload = encode(reply)
    assert payload[:1] == JSON_TAG
    assert decode(payload) == reply


@pytest.mark.parametrize("message", [
    {"init_inputs": [(3, 5), 2]},                # a tuple stays a tuple
    {"weights": torch.arange(4.0)},              # a CPU tensor
    {"by_index": {0: "a"}},                      # a key JSON would turn into a string
])
def test_anything_json_would_change_goes_the_torch_way_and_comes_back_exact(message):
    payload = encode(message)
    assert payload[:1] == TORCH_TAG
    back = decode(payload)
    assert back.keys() == message.keys()
    for key, value in message.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(back[key], value)
        else:
            assert back[key] == value and type(back[key]) is type(value)
    assert type(decode(encode({"init_inputs": [(3, 5)]}))["init_inputs"][0]) is tuple


class _Runs:
    def __reduce__(self):
        return (os.system, ("touch /tmp/hercules-codec-ran",))


@pytest.mark.parametrize("payload", [
    b"",
    b"Xnot a message",
    JSON_TAG + b'{"open": ',
    JSON_TAG + b"[1, 2]",
    JSON_TAG + b"[" * 200_000 + b"]" * 200_000,
    TORCH_TAG + b"\x80\x02garbage",
    TORCH_TAG + pickle.dumps({"x": _Runs()}, protocol=2),
])
def test_forged_bytes_are_a_value_error_and_run_nothing(payload, tmp_path):
    if os.path.exists("/tmp/hercules-codec-ran"):
        os.unlink("/tmp/hercules-codec-ran")
    with pytest.raises(ValueError):
        decode(payload)
    assert not os.path.exists("/tmp/hercules-codec-ran")


def test_a_torch_saved_message_that_is_not_a_dict_is_refused():
    buffer = io.BytesIO()
    torch.save([1, 2], buffer)
    with pytest.raises(ValueError, match="not a dict"):
        decode(TORCH_TAG + buffer.getvalue())
