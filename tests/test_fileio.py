"""Atomic writes: the file appears whole, parents are made, no temporary file is left behind."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from hercules.fileio import write_text_atomic


def test_writes_whole_file_in_new_folders_without_leftovers(tmp_path):
    target = tmp_path / "a" / "b" / "summary.json"
    assert write_text_atomic(target, "first") == target
    write_text_atomic(target, "second")
    assert target.read_text() == "second"
    assert sorted(p.name for p in target.parent.iterdir()) == ["summary.json"]


def test_concurrent_writers_of_one_file_leave_one_complete_version(tmp_path):
    target = tmp_path / "cache.json"
    texts = [str(i) * 10_000 for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda text: write_text_atomic(target, text), texts))
    assert target.read_text() in texts
    assert [p.name for p in tmp_path.iterdir()] == ["cache.json"]
