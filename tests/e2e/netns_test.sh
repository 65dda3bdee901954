#!/usr/bin/env bash
# Real network hops: a 2 pservers x 2 trainers job with each `oar run` in its
# own Linux network namespace, joined by veth pairs to a bridge (in a
# namespace of its own, so the host's network is untouched). Made and removed
# here; skipped (exit 77) where namespaces cannot be made (not root, no
# iproute2, no veth/bridge in the kernel).
#   1. The sync job across the hops trains to the same losses, bit for bit,
#      as the same job on loopback under `oar launch`.
#   2. With netem (20 ms +- 5 ms delay, 1% loss) on every link, the same
#      (skipped, saying so, where the kernel has no sch_netem).
#   3. A link taken down mid-job (pserver 0 partitioned): every other process
#      exits non-zero within FLAGS_rpc_deadline + 5 s, the trainers naming
#      pserver 0's endpoint, pserver 1 naming the trainers it lost.
# Usage: netns_test.sh OAR_BINARY
set -uo pipefail
OAR=${1:?usage: netns_test.sh OAR_BINARY}
SKIP=77
skip() { echo "SKIP: $*"; exit $SKIP; }
fail() { echo "FAIL: $*"; FAILED=1; }
FAILED=0

[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip >/dev/null || skip "no ip (iproute2)"
TAG="o$$"
BR="${TAG}br"
NS=("${TAG}p0" "${TAG}p1" "${TAG}t0" "${TAG}t1")
ADDR=(10.77.0.1 10.77.0.2 10.77.0.3 10.77.0.4)
WORK=$(mktemp -d /tmp/oar_netns.XXXXXX)

source "$(dirname "$0")/netns_lib.sh"
trap netns_cleanup EXIT

why=$(netns_bridge "$TAG" "$BR" NS ADDR) || skip "$why"

PSERVERS="${ADDR[0]}:6174,${ADDR[1]}:6174"
SMALL=(--model=fashion_mlp --limit=2000 --batch_size=64 --seed=3 --constant_init=0.01 --optimizer=sgd --lr=0.001)

# start NAME I ARGS...: one `oar run` in namespace I, output to $WORK/NAME.log
start() {
  local name=$1 i=$2
  shift 2
  local role=TRAINER
  local env=(PADDLE_TRAINERS_NUM=2 PADDLE_PSERVER_ENDPOINTS=$PSERVERS)
  if [ "$i" -lt 2 ]; then
    role=PSERVER
    env+=(PADDLE_CURRENT_ENDPOINT=${ADDR[$i]}:6174)
  else
    env+=(PADDLE_TRAINER_ID=$((i - 2)))
  fi
  ip netns exec "${NS[$i]}" env PADDLE_TRAINING_ROLE=$role "${env[@]}" OPENBLAS_NUM_THREADS=1 \
    "$OAR" run "$@" >"$WORK/$name.log" 2>&1 &
  PIDS[$i]=$!
}

# job TAG ARGS...: the 4 processes, waited for; fails naming any that failed.
job() {
  local tag=$1
  shift
  PIDS=()
  start "$tag.p0" 0 "$@"
  start "$tag.p1" 1 "$@"
  start "$tag.t0" 2 --step_log="$WORK/$tag.t0.steps" "$@"
  start "$tag.t1" 3 --step_log="$WORK/$tag.t1.steps" "$@"
  local ok=0 names=(p0 p1 t0 t1)
  for i in 0 1 2 3; do
    if ! wait "${PIDS[$i]}"; then
      fail "$tag: ${names[$i]} failed: $(tail -3 "$WORK/$tag.${names[$i]}.log")"
      ok=1
    fi
  done
  return $ok
}

# The reference: the same job on loopback.
"$OAR" launch --pservers 2 --trainers 2 "${SMALL[@]}" --max_steps=10 --step_log_dir="$WORK/ref" >"$WORK/ref.log" 2>&1 ||
  { cat "$WORK/ref.log"; fail "the loopback reference failed"; exit 1; }

# 1. Across the hops.
if job hops "${SMALL[@]}" --max_steps=10 --rpc_deadline=20000; then
  for t in 0 1; do
    if cmp -s "$WORK/ref/trainer.$t.steps" "$WORK/hops.t$t.steps"; then
      echo "ok: across namespaces trainer $t's 10 losses equal the loopback run's"
    else
      fail "trainer $t's losses across namespaces differ from loopback: $(paste -sd' ' "$WORK/hops.t$t.steps") vs $(paste -sd' ' "$WORK/ref/trainer.$t.steps")"
    fi
  done
fi

# 2. Delay and loss on every link.
if ip netns exec "${NS[0]}" tc qdisc add dev eth0 root netem delay 20ms 5ms loss 1% 2>"$WORK/netem.err"; then
  for i in 1 2 3; do ip netns exec "${NS[$i]}" tc qdisc add dev eth0 root netem delay 20ms 5ms loss 1%; done
  if job netem "${SMALL[@]}" --max_steps=10 --rpc_deadline=30000; then
    for t in 0 1; do
      cmp -s "$WORK/ref/trainer.$t.steps" "$WORK/netem.t$t.steps" && echo "ok: with netem trainer $t's losses equal loopback's" ||
        fail "with netem trainer $t's losses differ from loopback"
    done
  fi
  for i in 0 1 2 3; do ip netns exec "${NS[$i]}" tc qdisc del dev eth0 root 2>/dev/null; done
else
  echo "SKIP netem (20 ms +- 5 ms, 1% loss): this kernel has no sch_netem ($(head -1 "$WORK/netem.err"))"
fi

# 3. Partition pserver 0 mid-job.
DEADLINE_MS=4000
PIDS=()
for i in 0 1 2 3; do
  start "cut.$i" "$i" --model=fashion_mlp --epochs=5 --batch_size=64 --rpc_deadline=$DEADLINE_MS --report
done
for _ in $(seq 1 600); do  # both trainers training
  grep -q "@oar progress" "$WORK/cut.2.log" 2>/dev/null && grep -q "@oar progress" "$WORK/cut.3.log" 2>/dev/null && break
  sleep 0.1
done
grep -q "@oar progress" "$WORK/cut.3.log" || fail "partition: the trainers never started"
ip -n "${NS[0]}" link set eth0 down
cut_at=$(date +%s%3N)
LIMIT_MS=$((DEADLINE_MS + 5000))
for i in 1 2 3; do
  code=0
  # Wait for process i, at most LIMIT seconds after the cut (plus a margin to report it).
  for _ in $(seq 1 $((LIMIT_MS / 100 + 100))); do kill -0 "${PIDS[$i]}" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "${PIDS[$i]}" 2>/dev/null; then
    fail "partition: process $i still running long after the cut"
    kill -9 "${PIDS[$i]}"
    continue
  fi
  wait "${PIDS[$i]}" || code=$?
  took=$(($(date +%s%3N) - cut_at))
  [ "$code" -ne 0 ] || fail "partition: process $i exited 0"
  [ "$took" -le "$LIMIT_MS" ] || fail "partition: process $i took ${took} ms to exit (limit FLAGS_rpc_deadline + 5 s = ${LIMIT_MS} ms)"
  echo "ok: after the cut process $i exited $code within ${took} ms"
done
for t in 2 3; do
  grep -q "${ADDR[0]}:6174" "$WORK/cut.$t.log" || fail "partition: trainer $((t - 2)) does not name pserver 0: $(tail -2 "$WORK/cut.$t.log")"
done
grep -q "never arrived" "$WORK/cut.1.log" || fail "partition: pserver 1 does not name the trainers it lost: $(tail -2 "$WORK/cut.1.log")"
kill -9 "${PIDS[0]}" 2>/dev/null
exit $FAILED
