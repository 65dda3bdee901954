# Sourced by tests/e2e/netns_test.sh and bench/scaling_bench.sh: Linux
# network namespaces joined to a bridge, each its own "host".
#
# netns_bridge TAG BR NS ADDR: makes namespace BR holding a bridge br0 and
# joins each namespace named in the array NS (made here) to it by a veth
# pair: eth0 inside, with the address at the same index of the array ADDR
# (/24); the bridge ends are ${TAG}b<i>. Where namespaces, bridges or veths
# cannot be made it prints why and returns 1. netns_cleanup removes them.
netns_bridge() {
  local tag=$1 br=$2 i
  local -n names=$3 addrs=$4
  ip netns add "$br" 2>/dev/null || { echo "cannot create a network namespace"; return 1; }
  ip -n "$br" link add br0 type bridge 2>/dev/null || { echo "no bridge support in this kernel"; return 1; }
  ip -n "$br" link set br0 up
  for i in "${!names[@]}"; do
    ip netns add "${names[$i]}" || { echo "cannot create namespace ${names[$i]}"; return 1; }
    ip link add "${tag}a$i" type veth peer name "${tag}b$i" 2>/dev/null || { echo "no veth support in this kernel"; return 1; }
    ip link set "${tag}a$i" netns "${names[$i]}"
    ip link set "${tag}b$i" netns "$br"
    ip -n "${names[$i]}" link set "${tag}a$i" name eth0
    ip -n "${names[$i]}" addr add "${addrs[$i]}/24" dev eth0
    ip -n "${names[$i]}" link set eth0 up
    ip -n "${names[$i]}" link set lo up
    ip -n "$br" link set "${tag}b$i" master br0
    ip -n "$br" link set "${tag}b$i" up
  done
}

# netns_cleanup: for `trap netns_cleanup EXIT` — kills the caller's
# background jobs and removes the namespaces in NS, then BR, and $WORK.
netns_cleanup() {
  local pid ns
  for pid in $(jobs -p); do kill -9 "$pid" 2>/dev/null; done
  wait 2>/dev/null
  for ns in "${NS[@]}" "$BR"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$WORK"
}
