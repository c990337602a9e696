"""The parent's collector is paused for timed requests (whose length is kept), shared by threads, and left as found."""

from __future__ import annotations

import gc
import threading

from hercules.harness import collector


def test_collection_is_paused_inside_and_resumes_after():
    assert gc.isenabled()
    with collector.paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_collection_resumes_only_when_the_last_of_overlapping_pauses_ends():
    inside, release = threading.Event(), threading.Event()

    def hold():
        with collector.paused():
            inside.set()
            release.wait(10)

    other = threading.Thread(target=hold)
    other.start()
    assert inside.wait(10)
    with collector.paused():
        pass
    assert not gc.isenabled()  # the other thread's pause still holds
    release.set()
    other.join(10)
    assert gc.isenabled()


def test_a_collector_switched_off_by_the_caller_stays_off():
    gc.disable()
    try:
        with collector.paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_timed_body_runs_with_collection_paused_and_its_length_is_kept():
    import time

    with collector.timed() as clock:
        assert not gc.isenabled()
        time.sleep(0.02)
    assert gc.isenabled()
    assert 20.0 <= clock.ms < 2000.0
