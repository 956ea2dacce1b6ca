# Helpers shared by the benchmark scripts that time whole commands (scripts/bench-report.sh,
# scripts/bench-rl.sh): sourced, never run. They read RUNS (runs per command), TIME
# (/usr/bin/time) and BYTES (the corpus size) from the script.

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
