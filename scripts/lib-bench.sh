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

# tree_cpu OUT CMD...: runs CMD in a cgroup of its own and writes to OUT the CPU seconds
# (user + system) of every process it started. /usr/bin/time cannot give that figure
# for sandboxes: it counts the children each process waited for, and bwrap's sandboxed
# processes are reaped inside their PID namespace, so most of a bwrap call's CPU is not
# in it (measured: 2.4 of 9.3 ms a call). Needs a writable cgroup (cgroup v2's cpu.stat
# or v1's cpuacct: as root in most containers); without one it says so and returns 125
# without running CMD. Otherwise returns CMD's status.
tree_cpu() {
    local out=$1 g="" kind="" base rc=0
    shift
    for base in /sys/fs/cgroup /sys/fs/cgroup/unified; do
        [[ -f $base/cgroup.controllers ]] || continue
        g="$base/traj-bench.$$.$RANDOM"
        mkdir "$g" 2>/dev/null && { kind=v2; break; }
    done
    if [[ -z $kind && -d /sys/fs/cgroup/cpuacct ]]; then
        g="/sys/fs/cgroup/cpuacct/traj-bench.$$.$RANDOM"
        mkdir "$g" 2>/dev/null && kind=v1
    fi
    if [[ -z $kind ]]; then
        echo "tree_cpu: no writable cgroup (v2 cpu.stat or v1 cpuacct) to count the CPU of $1's sandboxed processes; run as root" >&2
        return 125
    fi
    bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$g" "$@" || rc=$?
    # Whatever CMD left running is part of its cost: wait for it.
    while [[ -n $(cat "$g/cgroup.procs") ]]; do sleep 0.05; done
    case $kind in
        v2) awk '$1 == "usage_usec" { printf "%.3f\n", $2 / 1e6 }' "$g/cpu.stat" >"$out" ;;
        v1) awk '{ printf "%.3f\n", $1 / 1e9 }' "$g/cpuacct.usage" >"$out" ;;
    esac
    rmdir "$g"
    return "$rc"
}

# need_tree_cpu: ends the script when tree_cpu cannot count here.
need_tree_cpu() {
    tree_cpu /dev/null true || exit 1
}

# settle: waits (30 s at most) until the machine has been at least 90% idle for a second.
# After hundreds of sandboxes the kernel goes on tearing their namespaces down for some
# seconds; a figure taken then pays for the run before it.
settle() {
    local a b t
    for t in $(seq 30); do
        read -r -a a < <(head -n1 /proc/stat)
        sleep 1
        read -r -a b < <(head -n1 /proc/stat)
        awk -v i0="${a[4]}" -v i1="${b[4]}" -v t0="$(IFS=+; echo $((${a[*]:1})))" \
            -v t1="$(IFS=+; echo $((${b[*]:1})))" 'BEGIN { exit !((i1 - i0) >= 0.9 * (t1 - t0)) }' && return 0
    done
    echo "settle: the machine was still busy after $t s" >&2
}
