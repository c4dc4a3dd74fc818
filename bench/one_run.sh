#!/usr/bin/env bash
# Issue 41's comparisons and targets in one run, one after the other, on a quiet machine.
# Usage: bench/one_run.sh OUT NEW OLD_CLIENT OLD_SQLITE OLD_LAYER
#   OUT: a folder for the logs and figures; NEW: the checkout measured;
#   OLD_*: checkouts of the last commits with the parts given back (each with the same .venv):
#   git worktree add --detach DIR ce2bec2 (the HTTP client of our own, core/http11.py),
#   9ae4047 (the SQLite writer queue, webapp/sqlite), 138fa1e (the Redis layer fork).
# Each step's time and the load average before it go to OUT/steps.log.
set -u
OUT=$1 NEW=$2 OLD_CLIENT=$3 OLD_SQLITE=$4 OLD_LAYER=$5
mkdir -p "$OUT"
log() { echo "$(date -u +%H:%M:%S) $* | $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/steps.log"; }
py() { (cd "$1" && shift && .venv/bin/python "$@"); }
log start "$(git -C "$NEW" log --oneline -1)"
log one-process;  py "$NEW" bench/bench_concurrency.py --json "$OUT/one.json" > "$OUT/one.log" 2>&1
log 2x2-new-1;    py "$NEW" bench/bench_multiprocess.py --json "$OUT/mp-new-1.json" > "$OUT/mp-new-1.log" 2>&1
log 2x2-fork;     py "$OLD_LAYER" bench/bench_multiprocess.py --json "$OUT/mp-fork.json" > "$OUT/mp-fork.log" 2>&1
log 2x2-core;     py "$NEW" bench/bench_multiprocess.py --layer core --json "$OUT/mp-core.json" > "$OUT/mp-core.log" 2>&1
log 2x2-pubsub;   py "$NEW" bench/bench_multiprocess.py --layer pubsub --json "$OUT/mp-pubsub.json" > "$OUT/mp-pubsub.log" 2>&1
log 2x2-new-2;    py "$NEW" bench/bench_multiprocess.py --json "$OUT/mp-new-2.json" > "$OUT/mp-new-2.log" 2>&1
log client-new;   py "$NEW" bench/bench_read_path_cpu.py > "$OUT/client-new.log" 2>&1
log client-old;   py "$OLD_CLIENT" bench/bench_read_path_cpu.py > "$OUT/client-old.log" 2>&1
log sqlite-queue; py "$OLD_SQLITE" bench/bench_concurrency.py --json "$OUT/sqlite-queue.json" > "$OUT/sqlite-queue.log" 2>&1
log sqlite-stock; py "$NEW" bench/bench_concurrency.py --json "$OUT/sqlite-stock.json" > "$OUT/sqlite-stock.log" 2>&1
log 2x2-new-3;    py "$NEW" bench/bench_multiprocess.py --json "$OUT/mp-new-3.json" > "$OUT/mp-new-3.log" 2>&1
log ttft;         py "$NEW" bench/bench_ttft.py --mode both --json "$OUT/ttft.json" > "$OUT/ttft.log" 2>&1
log 4x4-300;      py "$NEW" bench/bench_multiprocess.py --webs 4 --workers 4 --conversations 300 --rate 20 --duration 20 --grace 300 --json "$OUT/mp-300.json" > "$OUT/mp-300.log" 2>&1
log mcp;          py "$NEW" bench/bench_mcp.py --turns 20 --calls 300 --ttl 2 > "$OUT/mcp.log" 2>&1
log done
