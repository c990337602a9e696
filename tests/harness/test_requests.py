"""Requests between the parent and its workers: typed at both ends, refused field by field."""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import fields
from pathlib import Path

import pytest

from hercules.harness import requests
from hercules.harness.codec import decode, encode
from hercules.harness.worker import ROLES, handler_for


def test_every_request_round_trips_through_the_codec_and_parse():
    """What crosses the pipe is plain data (weights_only-safe) and comes back as the same record."""
    samples = {
        requests.Compare: requests.Compare(layout={"slots": []}, types=["torch.Tensor"], seeds=[1, None], strict=[0]),
        requests.Run: requests.Run(layout={"slots": []}, specs=[{"shape": [2], "dtype": "float32"}], first=True),
        requests.Setup: requests.Setup(code="x", device="cpu", dtype="float32", init_seed=3, tolerance={"atol": 1.0}),
    }
    for kind, request in samples.items():
        again = requests.parse(decode(encode(request.message())))
        assert type(again) is kind and again == request


def test_a_renamed_missing_or_unknown_field_is_refused_by_name():
    with pytest.raises(requests.RequestError, match="no field seeed"):
        requests.parse({"op": "inputs", "seeed": 1})
    with pytest.raises(requests.RequestError, match="misses seed"):
        requests.parse({"op": "inputs"})
    with pytest.raises(requests.RequestError, match="unknown operation"):
        requests.parse({"op": "op_that_does_not_exist"})


def test_every_request_has_exactly_one_handler_and_every_handler_a_request():
    answered = {}
    for role, cls in ROLES.items():
        worker = cls()
        for kind in requests.REQUESTS.values():
            try:
                handler_for(worker, kind)
            except requests.RequestError:
                continue
            answered.setdefault(kind, []).append(role)
        methods = [m for _, m in inspect.getmembers(cls, inspect.isfunction) if hasattr(m, "handles")]
        assert all(m.handles in requests.REQUESTS.values() for m in methods)
    assert set(answered) == set(requests.REQUESTS.values()), set(requests.REQUESTS.values()) - set(answered)


def test_every_field_a_handler_reads_is_a_field_of_its_request():
    """A handler reading ``request.x`` for an x its record lacks would fail only when that request
    runs (on a GPU, perhaps): read from the source here instead."""
    for cls in ROLES.values():
        for _, method in inspect.getmembers(cls, inspect.isfunction):
            kind = getattr(method, "handles", None)
            if kind is None:
                continue
            tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
            read = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name) and node.value.id == "request"}
            assert read <= {f.name for f in fields(kind)} | {"op"}, (method.__qualname__, read)


def test_every_request_the_parent_builds_names_only_fields_of_its_record():
    source = (Path(requests.__file__).parent / "evaluate.py").read_text()
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "requests"):
            kind = getattr(requests, node.func.attr)
            names = {k.arg for k in node.keywords if k.arg is not None}
            assert names <= {f.name for f in fields(kind)}, (node.func.attr, names)
