#!/usr/bin/env bash
# scaling_bench.sh OAR_BINARY: docs/scaling.md's cost model (scaling_model.py)
# against real hops. Each `oar run` in its own network namespace, joined by
# veth pairs to a bridge (namespaces of their own: the host's network is
# untouched), every veth rate-limited with tc tbf on both ends. For each link
# setting — none, then 1gbit and 10gbit — it measures the link itself
# between namespaces, in Python: a bulk TCP transfer; the traffic of a
# pserver step (the parameters' bytes out, then back, after an idle gap);
# the traffic of a 2-rank ring all-reduce (half the bytes each way at once,
# twice, after an idle gap); a 64-byte round trip. Each mode's B is the rate
# of its own pattern: a shaper's burst makes a short exchange after idle
# faster than a bulk transfer, and the jobs get that burst too.
# It then runs fashion_mlp (global batch 128: 64 per trainer step, Adam) as:
#   sync   2 pservers x 2 trainers
#   geo    2 pservers x 2 trainers, --async --geo_sgd_mode (K=20)
#   ring   nccl2, 2 trainers, the TCP ring
# The unlimited run calibrates each mode's compute per step (its measured
# step less the model's communication at the measured rate); the model then
# predicts the rate-limited runs from the links' measured rates and round
# trips. Prints measured (the median of $ROUNDS runs, default 3) and predicted
# examples/s and the error (target: within 20%). Root only (exit 77
# elsewhere, saying why). About a minute.
set -uo pipefail
OAR=${1:?usage: scaling_bench.sh OAR_BINARY}
HERE=$(cd "$(dirname "$0")" && pwd)
MODEL="python3 $HERE/scaling_model.py"
[ "$(id -u)" = 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
command -v tc >/dev/null || { echo "SKIP: no tc (iproute2)"; exit 77; }
TAG="s$$"
NS=("${TAG}p0" "${TAG}p1" "${TAG}t0" "${TAG}t1")
ADDR=(10.78.0.1 10.78.0.2 10.78.0.3 10.78.0.4)
BR="${TAG}br"
WORK=$(mktemp -d /tmp/oar_scaling.XXXXXX)
source "$HERE/../tests/e2e/netns_lib.sh"
trap netns_cleanup EXIT
why=$(netns_bridge "$TAG" "$BR" NS ADDR) || { echo "SKIP: $why"; exit 77; }

# limit RATE: tbf on both ends of every veth (none: no qdisc).
limit() {
  for i in 0 1 2 3; do
    ip -n "${NS[$i]}" link set eth0 up
    ip netns exec "${NS[$i]}" tc qdisc del dev eth0 root 2>/dev/null
    ip netns exec "$BR" tc qdisc del dev "${TAG}b$i" root 2>/dev/null
    [ "$1" = none ] && continue
    ip netns exec "${NS[$i]}" tc qdisc add dev eth0 root tbf rate "$1" burst 256kb latency 100ms || return 1
    ip netns exec "$BR" tc qdisc add dev "${TAG}b$i" root tbf rate "$1" burst 256kb latency 100ms || return 1
  done
}

# link: "BULK_GBPS STEP_GBPS RTT_US RING_GBPS": between trainer 0's and
# pserver 0's namespaces a bulk transfer's rate, the rate of a pserver
# step's traffic — S bytes out then S back, after the idle gap of a step's
# compute (2S over its time: the sync and GEO-SGD models' B) — and a 64-byte
# round trip; between the two trainers' namespaces, the rate of a 2-rank
# ring all-reduce's traffic — S/2 bytes each way at once, twice, after an
# idle gap (S over its time: the ring model's B).
link() {
  ip netns exec "${NS[0]}" python3 - <<'EOF' &
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 7001)); s.listen(3)
c, _ = s.accept()  # bulk
while c.recv(1 << 20):
    pass
for size in (940584, 64):  # exchanges: echo each message back
    c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        got = b""
        while len(got) < size:
            d = c.recv(size - len(got))
            if not d:
                break
            got += d
        if len(got) < size:
            break
        c.sendall(got)
EOF
  sleep 0.5
  ip netns exec "${NS[2]}" python3 - "${ADDR[0]}" <<'EOF'
import socket, statistics, sys, time
b = socket.create_connection((sys.argv[1], 7001)); chunk = b"x" * (1 << 20); t = time.time()
for _ in range(120):
    b.sendall(chunk)
b.close(); bulk = 120 * 8 * (1 << 20) / (time.time() - t) / 1e9
def exchanges(size, n, gap):
    c = socket.create_connection((sys.argv[1], 7001)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    times = []
    for _ in range(n):
        time.sleep(gap)
        t = time.perf_counter(); c.sendall(b"y" * size); got = 0
        while got < size:
            got += len(c.recv(size - got))
        times.append(time.perf_counter() - t)
    c.close()
    return statistics.median(times)
step = exchanges(940584, 40, 0.005)
rtt = exchanges(64, 300, 0)
print(f"{bulk:.3f} {2 * 940584 * 8 / max(step - rtt, 1e-9) / 1e9:.3f} {rtt * 1e6:.0f}", end=" ")
EOF
  wait
  # The ring's pattern: both trainers at once, each a listener and a client.
  local duplex=$WORK/duplex.py
  cat >"$duplex" <<'EOF'
import socket, statistics, sys, threading, time
me, peer, size = sys.argv[1], sys.argv[2], 940584 // 2
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); srv.bind((me, 7002)); srv.listen(1)
out = None
while out is None:
    try:
        out = socket.create_connection((peer, 7002))
    except OSError:
        time.sleep(0.05)
inc, _ = srv.accept()
for s in (out, inc):
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
data = b"r" * size
def recv(n):
    while n > 0:
        n -= len(inc.recv(min(n, 1 << 20)))
times = []
for _ in range(40):
    time.sleep(0.005)
    out.sendall(b"g"); recv(1)  # both start together
    t = time.perf_counter()
    for _ in range(2):  # reduce-scatter, all-gather
        w = threading.Thread(target=out.sendall, args=(data,)); w.start(); recv(size); w.join()
    times.append(time.perf_counter() - t)
if me < peer:
    print(f"{2 * size * 8 / statistics.median(times) / 1e9:.3f}")
EOF
  ip netns exec "${NS[3]}" python3 "$duplex" "${ADDR[3]}" "${ADDR[2]}" &
  ip netns exec "${NS[2]}" python3 "$duplex" "${ADDR[2]}" "${ADDR[3]}"
  wait
}

COMMON=(--model=fashion_mlp --batch_size=128 --limit=25600 --epochs=1 --seed=3)
PSERVERS="${ADDR[0]}:6174,${ADDR[1]}:6174"
TRAINERS="${ADDR[2]}:6175,${ADDR[3]}:6175"
# job MODE TAG: the mode's processes, waited for; prints the job's examples/s.
job() {
  local mode=$1 tag=$2 pids=() i flags=()
  case $mode in
    geo) flags=(--async --geo_sgd_mode --geo_sgd_need_push_nums=20) ;;
    ring) flags=(--mode=nccl2 --collective_transport=tcp) ;;
  esac
  for i in 0 1 2 3; do
    local env=(PADDLE_TRAINERS_NUM=2 PADDLE_TRAINER_ENDPOINTS=$TRAINERS OPENBLAS_NUM_THREADS=1)
    if [ "$i" -lt 2 ]; then
      [ "$mode" = ring ] && continue
      env+=(PADDLE_TRAINING_ROLE=PSERVER PADDLE_PSERVER_ENDPOINTS=$PSERVERS PADDLE_CURRENT_ENDPOINT=${ADDR[$i]}:6174)
    else
      env+=(PADDLE_TRAINING_ROLE=TRAINER PADDLE_TRAINER_ID=$((i - 2)) PADDLE_CURRENT_ENDPOINT=${ADDR[$i]}:6175)
      [ "$mode" = ring ] || env+=(PADDLE_PSERVER_ENDPOINTS=$PSERVERS)
    fi
    ip netns exec "${NS[$i]}" env "${env[@]}" "$OAR" run "${COMMON[@]}" "${flags[@]}" --report \
      >"$WORK/$tag.$i.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { echo "FAIL: $tag: $(tail -3 "$WORK"/$tag.*.log)" >&2; return 1; }; done
  # The job's rate: both trainers' examples over the slower one's training time.
  cat "$WORK/$tag.2.log" "$WORK/$tag.3.log" | grep '^@oar result' |
    sed -E 's/.*examples=([0-9]+) seconds=([0-9.]+).*/\1 \2/' |
    awk '{e += $1; if ($2 > s) s = $2} END {if (s > 0) printf "%.0f\n", e / s; else print 0}'
}

ROUNDS=${ROUNDS:-3}  # runs of each job per link setting; the median is used
SIZE=940584  # fashion_mlp's parameters: (784*256 + 256 + 256*128 + 128 + 128*10 + 10) floats
BATCH=64     # examples per trainer step: --batch_size is the job's, cut among the 2 trainers
declare -A COMPUTE
FAILED=0
printf "%-8s %-6s %9s %9s %7s %12s %12s %7s\n" link mode "bulk Gb/s" "B Gb/s" "rtt us" measured predicted error
for rate in none 1gbit 10gbit; do
  limit "$rate" || { echo "SKIP: tc tbf refused ($rate)"; exit 77; }
  read -r bulk step rtt ring < <(link)
  for mode in sync geo ring; do
    runs=()
    for r in $(seq 1 "$ROUNDS"); do
      e=$(job "$mode" "$mode.$rate.$r") || { FAILED=1; continue 2; }
      runs+=("$e")
    done
    eps=$(printf "%s\n" "${runs[@]}" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')  # the median
    # B: the rate of the mode's pattern, never below the bulk rate (each
    # direction has a shaper of its own; where Python cannot keep up with a
    # duplex exchange — about 6-9 Gb/s on 2 cores — the bulk rate stands).
    n_p=2 gbps=$step
    [ "$mode" = ring ] && n_p=1 gbps=$ring
    gbps=$(awk -v a="$bulk" -v b="$gbps" 'BEGIN {print (a > b ? a : b)}')
    args=(--param_bytes $SIZE --rtt_us "$rtt" --batch $BATCH --geo_push_nums 20)
    if [ "$rate" = none ]; then
      # Calibrate: the compute per step that makes the model meet this run.
      COMPUTE[$mode]=$(python3 - "$mode" "$eps" "$gbps" "$rtt" "$HERE" "$BATCH" <<'EOF'
import sys
sys.path.insert(0, sys.argv[5])
import scaling_model as m
mode, eps, gbps, rtt = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]) * 1e-6
k = 1 if mode == "ring" else 2
lo, hi = 1e-6, 1.0  # the model's rate falls as compute grows: bisect
for _ in range(100):
    c = (lo + hi) / 2
    if m.steps_per_second(mode, 2, k, 940584, gbps * 1e9 / 8, rtt, c, 0.0, 20) * int(sys.argv[6]) > eps:
        lo = c
    else:
        hi = c
print(f"{c * 1e3:.4f}")
EOF
)
      printf "%-8s %-6s %9.2f %9.2f %7s %12s %12s %7s  (calibrates compute: %s ms/step)\n" "$rate" "$mode" "$bulk" \
        "$gbps" "$rtt" "$eps" - - "${COMPUTE[$mode]}"
      continue
    fi
    pred=$($MODEL predict --mode "$mode" --trainers 2 --pservers $n_p --gbps "$gbps" --compute_ms "${COMPUTE[$mode]}" \
      "${args[@]}")
    err=$(awk -v m="$eps" -v p="$pred" 'BEGIN {printf "%+.0f%%", 100 * (p - m) / m}')
    printf "%-8s %-6s %9.2f %9.2f %7s %12s %12s %7s\n" "$rate" "$mode" "$bulk" "$gbps" "$rtt" "$eps" "$pred" "$err"
  done
done
limit none
exit $FAILED
