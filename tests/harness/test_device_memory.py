"""What held a GPU's memory, read without a CUDA context: the parsers on nvidia-smi's own output
format (scripted text), the /proc scan on a real open file, the absent tool."""

from __future__ import annotations

import os

from hercules.harness import device_memory
from hercules.harness.device_memory import DeviceMemory, parse_apps, parse_gpu_line, physical_index

GPUS = "0, 79872, 81559, GPU-aaaa\n1, 1024, 81559, GPU-bbbb\n"
APPS = "GPU-aaaa, 5627, 710\nGPU-aaaa, 5630, 12600\nGPU-bbbb, 7001, 1000\nGPU-aaaa, 5631, [N/A]\n"


def test_the_device_line_and_its_processes_are_read_for_that_device_only():
    assert parse_gpu_line(GPUS, 0) == (79872, 81559, "GPU-aaaa")
    assert parse_gpu_line(GPUS, 1) == (1024, 81559, "GPU-bbbb")
    assert parse_gpu_line(GPUS, 2) is None
    assert parse_gpu_line("0, [N/A], 81559, GPU-aaaa", 0) is None
    assert parse_apps(APPS, "GPU-aaaa") == ((5627, 710), (5630, 12600))  # the unreadable figure left out


def test_memory_no_visible_process_holds_is_named():
    used, total, uuid = parse_gpu_line(GPUS, 0)
    memory = DeviceMemory(used, total, parse_apps(APPS, uuid), ((5627, "python -m hercules.harness.worker"),))
    assert memory.attributed_mib == 13310 and memory.unattributed_mib == 79872 - 13310
    assert 0.97 < memory.used_fraction < 0.99
    text = memory.describe()
    assert "78.0 GiB of 79.6 GiB in use" in text and "65.0 GiB to no visible process" in text
    assert "pid 5630 12.3 GiB" in text and "pid 5627 python -m hercules.harness.worker" in text


def test_visible_devices_map_torchs_index_to_nvmls():
    assert physical_index(0, "") == 0
    assert physical_index(1, "3,5") == 5
    assert physical_index(2, "3,5") is None
    assert physical_index(0, "GPU-aaaa") is None  # named by UUID: not guessed


def test_processes_holding_a_file_are_found_through_proc(tmp_path):
    path = tmp_path / "device-node"
    path.write_text("")
    with open(path):
        found = device_memory.holders(prefix=str(path))
        assert [pid for pid, _ in found] == [os.getpid()]
        assert device_memory.holders(prefix=str(path), exclude=os.getpid()) == ()
    assert device_memory.holders(prefix=str(path)) == ()


def test_without_nvidia_smi_nothing_is_claimed(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert device_memory.read(0) is None
