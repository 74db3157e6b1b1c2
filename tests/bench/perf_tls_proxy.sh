#!/bin/bash
# Profiles the proxy (--threads 1, core 1) under redis-benchmark -P 16 SET (core 0, with its two
# engines) over TLS, or plain with "plain": perf record -g for 8 s into /tmp/perf.MODE.data, then
#   perf report -i /tmp/perf.tls.data --no-children --sort symbol --stdio -g none
# Usage: tests/bench/perf_tls_proxy.sh [tls|plain]   (TERRACE: the binary, target/release/terrace)
set -e
T=${TERRACE:-target/release/terrace}
D=$(mktemp -d)
$T tls-gen $D/certs > /dev/null
for p in 17001 17002; do taskset -c 0 $T engine --port $p --data-dir $D/e$p > /dev/null 2>&1 & done
sleep 1
taskset -c 1 $T proxy --threads 1 --port 16379 --tls-port 16380 --memcache-port 0 --tls-cert-file $D/certs/server.crt --tls-key-file $D/certs/server.key --engines 127.0.0.1:17001,127.0.0.1:17002 > /dev/null 2>&1 &
PP=$!
sleep 1
MODE=${1:-tls}
if [ "$MODE" = tls ]; then PORT=16380; X="--tls --cacert $D/certs/ca.crt"; else PORT=16379; X=""; fi
taskset -c 0 redis-benchmark -p $PORT $X -t set -P 16 -c 50 -r 100000 -d 128 -n 4000000 -q > /tmp/rb.log 2>&1 &
RB=$!
sleep 2
perf record -F 2000 -g -p $PP -o /tmp/perf.$MODE.data -- sleep 8 2> /dev/null
kill $RB 2>/dev/null || true
pkill -f "terrace engine --port 1700" || true
kill $PP || true
sleep 0.5
rm -rf $D
