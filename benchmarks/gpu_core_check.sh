#!/usr/bin/env bash
# The evaluation core on the GPU machine in one call: the host's cgroup layout, device packs
# (tests and the hand-over benchmark), the sandbox and its red team on that host, and the
# sandboxed GPU evaluation. Prints as it goes; logs and JSON under $OUT.
#   OUT=/path bash benchmarks/gpu_core_check.sh        (bubblewrap from .tools/, carried)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-core-out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if ! command -v bwrap >/dev/null; then
  deb=$(ls .tools/bubblewrap_*.deb 2>/dev/null | head -1)
  [ -n "$deb" ] && dpkg -x "$deb" /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
step() { echo; echo "=== $1 ($(date +%T))"; }
step "cgroups"
cat /proc/1/cgroup /proc/self/cgroup
own=$(sed -n 's/^0:://p' /proc/self/cgroup | head -1)
echo "own: $own; parent subtree_control: $(cat /sys/fs/cgroup$(dirname "$own")/cgroup.subtree_control 2>&1)"
echo "own controllers: $(cat /sys/fs/cgroup$own/cgroup.controllers 2>&1)"
step "device packs"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/harness/test_device_pack.py 2>&1 | tail -15
timeout 150 python3 benchmarks/datapath.py --out "$OUT/datapath.json" --reps 3 2>&1 | tail -12
step "sandbox"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/harness/test_sandbox.py 2>&1 | tail -15
ls -d /sys/fs/cgroup$(dirname "$own")/hercules-* 2>/dev/null | head
step "red team (CPU device, this host)"
timeout ${REDTEAM_S:-200} python3 -m pytest -q -p no:cacheprovider tests/harness/test_redteam.py \
  -k "bomb or honest_control or could_still or not_judged or forged" 2>&1 | tail -15
step "sandboxed GPU evaluation"
timeout ${GPU_S:-150} python3 -m pytest -q -p no:cacheprovider tests/harness/test_harness_gpu.py -k sandbox 2>&1 | tail -15
step "done"
