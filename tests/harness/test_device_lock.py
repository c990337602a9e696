"""DeviceLock with real threads: trials share the device, a measurement has it alone, and a
waiting measurement is not starved by a stream of sharers."""

from __future__ import annotations

import threading
import time

import pytest

from hercules.harness.device_lock import DeviceLock, shared_section


def test_sharers_overlap_and_exclusive_waits_for_them():
    lock = DeviceLock()
    inside, peak, log = [0], [0], []
    guard = threading.Lock()

    def share():
        with lock.shared():
            with guard:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            time.sleep(0.2)
            with guard:
                inside[0] -= 1

    sharers = [threading.Thread(target=share) for _ in range(3)]
    for t in sharers:
        t.start()
    time.sleep(0.05)

    def measure():
        with lock:
            with guard:
                log.append(("exclusive", inside[0]))

    m = threading.Thread(target=measure)
    m.start()
    for t in [*sharers, m]:
        t.join(5)
    assert peak[0] == 3  # the three sharers held it together
    assert log == [("exclusive", 0)]  # the measurement ran with nobody else inside


def test_waiting_measurement_is_not_starved_by_new_sharers():
    lock = DeviceLock()
    order: list[str] = []
    first = threading.Event()

    def early_sharer():
        with lock.shared():
            first.set()
            time.sleep(0.2)
            order.append("early sharer done")

    def measurement():
        first.wait()
        with lock:
            order.append("measurement")

    def late_sharer():
        first.wait()
        time.sleep(0.05)  # arrives while the measurement is waiting
        with lock.shared():
            order.append("late sharer")

    threads = [threading.Thread(target=f) for f in (early_sharer, measurement, late_sharer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert order == ["early sharer done", "measurement", "late sharer"]


def test_a_plain_lock_is_taken_for_the_shared_side_too():
    plain = threading.Lock()
    with shared_section(plain):
        assert plain.locked()
    assert not plain.locked()


def test_an_evaluation_going_alone_waits_for_those_in_flight_and_holds_back_new_ones():
    lock = DeviceLock()
    log: list[str] = []
    guard = threading.Lock()
    in_flight = threading.Event()
    asked = threading.Event()

    def light(name: str, hold_s: float, wait_for: threading.Event | None = None):
        if wait_for is not None:
            wait_for.wait()
            time.sleep(0.05)
        with lock.evaluation():
            with guard:
                log.append(f"{name} start")
            in_flight.set()
            time.sleep(hold_s)
            with guard:
                log.append(f"{name} end")

    def heavy():
        in_flight.wait()
        with lock.evaluation() as place:
            asked.set()
            place.go_alone()
            with guard:
                log.append("heavy alone")
            time.sleep(0.1)
            with guard:
                log.append("heavy end")

    threads = [threading.Thread(target=light, args=("first", 0.3)), threading.Thread(target=heavy),
               threading.Thread(target=light, args=("late", 0.0, asked))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert log == ["first start", "first end", "heavy alone", "heavy end", "late start", "late end"], log


def test_two_evaluations_going_alone_take_turns():
    lock = DeviceLock()
    alone_now, overlaps, done = [0], [], []
    guard = threading.Lock()
    both_in = threading.Barrier(2)

    def heavy(name: str):
        with lock.evaluation() as place:
            both_in.wait(5)  # both in flight before either asks
            place.go_alone()
            with guard:
                alone_now[0] += 1
                overlaps.append(alone_now[0])
            time.sleep(0.1)
            with guard:
                alone_now[0] -= 1
        done.append(name)

    threads = [threading.Thread(target=heavy, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert sorted(done) == ["a", "b"]  # no deadlock
    assert overlaps == [1, 1]  # never both alone at once


def test_max_evaluations_bounds_those_in_flight():
    lock = DeviceLock(max_evaluations=2)
    in_flight: list[int] = []  # one entry per evaluation inside
    most, finished = [0], []
    guard = threading.Lock()

    def one(n: int):
        with lock.evaluation():
            with guard:
                in_flight.append(n)
                most[0] = max(most[0], len(in_flight))
            time.sleep(0.05)
            with guard:
                in_flight.remove(n)
        finished.append(n)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert sorted(finished) == list(range(6))
    assert most[0] == 2  # six asked at once: two at a time


def test_an_evaluation_going_alone_under_a_bound_frees_its_place_and_takes_its_turn():
    lock = DeviceLock(max_evaluations=1)
    done: list[str] = []

    def heavy():
        with lock.evaluation() as place:
            place.go_alone()  # the only one in flight: goes on at once
            done.append("heavy")

    def light():
        with lock.evaluation():
            done.append("light")

    threads = [threading.Thread(target=heavy), threading.Thread(target=light)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert sorted(done) == ["heavy", "light"]


def test_max_evaluations_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        DeviceLock(max_evaluations=0)
