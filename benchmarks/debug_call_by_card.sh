#!/usr/bin/env bash
# One call of the debugging run (benchmarks/debug_h200.sh) that goes on from the run made on the
# same card: a run folder is resumed only on the device that made it (debug run refuses another),
# and a device call may come on an H100 or an H200. Carry both folders; the card picks one:
#   runs/h200-carry/{run_slim,repro_cache}.tgz   runs/h100-carry/{run_slim,repro_cache}.tgz
# After the call, copy $OUT's run_slim.tgz and repro_cache.tgz over that card's two files.
#   OUT=$OUT CALL_S=585 bash benchmarks/debug_call_by_card.sh     (FIXERS, DEBUG_ARGS as in debug_h200.sh)
set -u
cd "$(dirname "$0")/.."
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
case "$NAME" in *H200*) C=runs/h200-carry ;; *H100*) C=runs/h100-carry ;; *) echo "card: '$NAME': no carry for it" >&2; exit 2 ;; esac
echo "card: $NAME  carry: $C"
CARRY=$C CALL_S=${CALL_S:-590} OUT=$OUT bash benchmarks/debug_h200.sh 2>&1 | grep -v "replay failed" | tail -n 25
