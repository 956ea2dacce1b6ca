# Helpers shared by the benchmark scripts: sourced, never run. `best`, `mbs` and `mb`
# (scripts/bench-report.sh, scripts/bench-rl.sh) read RUNS (runs per command), TIME
# (/usr/bin/time) and BYTES (the corpus size) from the script; `standin_workdir`
# (scripts/bench-run.sh, scripts/bench-sandbox.sh) sets WORK and STANDIN_PID.

# Where corpora are kept, which binaries run (TRAJ_BENCH_BIN_DIR=DIR: DIR's, not a
# release build) and the timer; ROOT is the script's checkout.
BENCH="$ROOT/target/bench"
DIR=${TRAJ_BENCH_BIN_DIR:-$ROOT/target/release}
TIME=/usr/bin/time

# standin_workdir NAME: a fresh WORK folder; at exit the stand-in server (STANDIN_PID,
# when set) is killed and WORK removed.
standin_workdir() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/traj-bench-$1.XXXXXX")
    STANDIN_PID=""
    trap 'standin_cleanup' EXIT
}
# start_standin SCRIPT LATENCY_MS: the stand-in endpoint (STANDIN) answering by SCRIPT
# after LATENCY_MS; sets STANDIN_PID and URL. stop_standin ends it.
start_standin() {
    : >"$WORK/addr"
    "$STANDIN" --latency-ms "$2" --script "$1" >"$WORK/addr" &
    STANDIN_PID=$!
    for _ in $(seq 100); do [[ -s $WORK/addr ]] && break; sleep 0.05; done
    URL=$(head -n1 "$WORK/addr")
}
stop_standin() {
    kill "$STANDIN_PID" 2>/dev/null || true
    wait "$STANDIN_PID" 2>/dev/null || true
    STANDIN_PID=""
    : >"$WORK/addr"
}
standin_cleanup() {
    [[ -n $STANDIN_PID ]] && kill "$STANDIN_PID" 2>/dev/null || true
    rm -rf "$WORK"
}

# best CMD: the best wall seconds of RUNS runs and the largest peak RSS (KB).
best() {
    local t="" rss=0 out w m
    for ((r = 0; r < RUNS; r++)); do
        out=$({ $TIME -f "%e %M" bash -c "$1" >/dev/null; } 2>&1 | tail -n 1)
        read -r w m <<<"$out"
        if [[ -z $t ]] || awk -v a="$w" -v b="$t" 'BEGIN { exit !(a < b) }'; then t=$w; fi
        ((m > rss)) && rss=$m
    done
    echo "$t $rss"
}

# mbs SECONDS: MB/s of the corpus in that time; mb KB: KB as MB.
mbs() { awk -v b="$BYTES" -v t="$1" 'BEGIN { printf "%.0f", b / 1e6 / t }'; }
mb() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }
