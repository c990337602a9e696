"""Where a timed burst's outputs will go, arranged before its clock starts: a host destination the
parent allocates, or, with device packs, a Reserve sent to the worker that will write the pack."""

from __future__ import annotations

import os

from hercules.harness import requests
from hercules.harness.datapath import planned_layout
from hercules.harness.measure import Transfers
from hercules.harness.protocol import Empty
from hercules.harness.session import Deadlines, Trials

SPECS = [{"shape": [64, 32], "dtype": "float32"}, {"shape": [5], "dtype": "int64"}]


class RecordingSession:
    """Answers every request with an empty reply and keeps (role, request) in order."""

    run_timeout_s = 30.0

    def __init__(self):
        self.sent: list[tuple[str, requests.Request]] = []

    def call(self, role, request, timeout, what, fds=(), idle_s=None):
        self.sent.append((role, request))
        return {}

    def candidate(self, record, request, timeout, what, fds=(), idle_s=None):
        self.sent.append(("candidate", request))
        return record.parse({}), []


def _transfers(datapath: str) -> tuple[Transfers, RecordingSession]:
    session = RecordingSession()
    trials = Trials(seeds=(1, 2), specs=SPECS, deadlines=Deadlines(run_timeout_s=30.0, ref_call_s=0.01, base_s=5.0, factor=10.0), signature="s")
    return Transfers(session, datapath, trials), session


def test_with_device_packs_the_writer_reserves_the_whole_pack_before_the_clock():
    transfers, session = _transfers("cuda")
    for writer in ("candidate", "reference"):
        with transfers.destination(3, writer) as destination:
            assert destination.fd is None and destination.fields() == {}
            role, request = session.sent[-1]
            assert role == writer and request == requests.Reserve(nbytes=planned_layout(SPECS, 3).size)
    assert len(session.sent) == 2 and Empty.parse({}) == Empty()


def test_with_host_packs_the_parent_allocates_the_destination_and_asks_nothing():
    transfers, session = _transfers("memfd")
    with transfers.destination(2, "candidate") as destination:
        assert os.fstat(destination.fd).st_size == planned_layout(SPECS, 2).size
        assert destination.fields() == {"into": planned_layout(SPECS, 2).to_message()}
    assert session.sent == []
