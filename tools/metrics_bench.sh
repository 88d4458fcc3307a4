#!/usr/bin/env bash
# What counting costs (docs/benchmarks.md, "Metrics: what counting costs"): YCSB C and A on a
# fresh 3-node cluster per run, in three settings side by side -- `--metrics off` (nothing
# counted), the default (every thread counts, no endpoint) and `--metrics 127.0.0.1:0` with
# every node scraped once a second by curl -- ROUNDS times, the settings' order rotating from
# round to round, then each setting's medians and their ratios to "off".
#
#   tools/metrics_bench.sh [BUILD_DIR]
#
# Environment: SECONDS_PER_RUN (default 10), ROUNDS (default 6), RECORDS (default 100000).
set -u
build=${1:-build}
bin="$build/bin"
for p in kvcluster kvbench; do
    [ -x "$bin/$p" ] || { echo "metrics_bench: no $bin/$p (build first)" >&2; exit 2; }
done
command -v curl >/dev/null || { echo "metrics_bench: needs curl" >&2; exit 2; }
secs=${SECONDS_PER_RUN:-10}
rounds=${ROUNDS:-6}
records=${RECORDS:-100000}
work=$(mktemp -d "${TMPDIR:-/tmp}/metrics-bench.XXXXXX") ||
    { echo "metrics_bench: cannot make a work directory" >&2; exit 2; }
scraper=""
cleanup() {
    [ -n "$scraper" ] && kill "$scraper" 2>/dev/null
    "$bin/kvcluster" stop --dir "$work/c" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT
echo "# kvbench ycsb run (c, a) --seconds $secs -p recordcount=$records on 3 nodes, $rounds rounds"
echo "# $(uname -sr), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
settings=(off count scraped)
for ((r = 0; r < rounds; r++)); do
    for k in 0 1 2; do
        v=${settings[$(((k + r) % 3))]}
        case $v in
        off) opt=(--metrics off) ;;
        count) opt=() ;;
        scraped) opt=(--metrics 127.0.0.1:0) ;;
        esac
        rm -rf "$work/c"
        if ! "$bin/kvcluster" start --nodes 3 --dir "$work/c" --bench --arena 1G "${opt[@]}" \
            >"$work/start.log" 2>&1; then
            echo "metrics_bench: the cluster did not start ($v):" >&2
            cat "$work/start.log" >&2
            exit 1
        fi
        if [ "$v" = scraped ]; then
            urls=$(grep -ho "http://[^ ]*/metrics" "$work"/c/node-*.log)
            (while :; do
                for u in $urls; do curl -s -o /dev/null "$u"; done
                sleep 1
            done) &
            scraper=$!
        fi
        c=(--config "$work/c/cluster.conf" --secret-file "$work/c/cluster.secret"
            -p recordcount="$records" --status-interval 0)
        "$bin/kvbench" ycsb load "${c[@]}" >/dev/null 2>&1
        for w in c a; do
            ops=$("$bin/kvbench" ycsb run "${c[@]}" --workload "$w" --seconds "$secs" 2>&1 |
                awk '/\[OVERALL\], Throughput/ { print $3 }')
            echo "$((r + 1)) $v $w ${ops:-failed}" | tee -a "$work/runs"
        done
        if [ -n "$scraper" ]; then
            kill "$scraper" 2>/dev/null
            wait "$scraper" 2>/dev/null
            scraper=""
        fi
        "$bin/kvcluster" stop --dir "$work/c" >/dev/null 2>&1
    done
done
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for w in c a; do
    off=$(awk -v w="$w" '$2 == "off" && $3 == w { print $4 }' "$work/runs" | median)
    for v in off count scraped; do
        m=$(awk -v w="$w" -v v="$v" '$2 == v && $3 == w { print $4 }' "$work/runs" | median)
        printf "YCSB %s %-8s median %10.0f ops/s  %.3f of off\n" "$w" "$v" "$m" \
            "$(awk -v a="$m" -v b="$off" 'BEGIN { print (b > 0 ? a / b : 0) }')"
    done
done
