#!/bin/bash
# The cluster's cost (docs/cluster.md), on loopback: a throwaway PostgreSQL and three `space serve --cluster`
# hosts on this machine, beside one `space serve` without a cluster.
#  - placement: the time cluster_place takes per create (the access log's place_ms), p50/p99;
#  - create latency through one host: alone vs in the cluster (placed on any of the three, forwarded when
#    placed elsewhere), p50/p99 and the ratio;
#  - creates per second with 8 clients: one host alone vs the three hosts (clients spread over them).
# The store is PostgreSQL, or with the argument `sqlite` one SQLite file the three share (the other
# back-end of the same interface). Hosts talk over TLS 1.3 (`space cluster ca/cert`). Every host of this machine shares its cores, so
# "across three hosts" measures the overhead, not a speed-up. Root, btrfs, loop devices, namespaces, PostgreSQL (77 otherwise). Final line: `cluster: ...`.
. "$(dirname "$0")/../tests/lib.sh"
need_root; need_btrfs; need_loop
need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
BACKEND=${1:-postgresql}
[ "$BACKEND" = postgresql ] || [ "$BACKEND" = sqlite ] || fail "unknown back-end '$BACKEND' (postgresql, sqlite)"
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ "$BACKEND" = postgresql ]; then
	[ -x "$PGBIN/initdb" ] || skip "postgresql missing (scripts/deps.sh installs it)"
	id postgres >/dev/null 2>&1 || skip "no postgres user (the postgresql package makes it)"
fi
"$SPACE" serve --help >/dev/null 2>&1 || skip "space built without libmicrohttpd"
export SPACE_QUIET_JAIL=1
N=${CLUSTER_BENCH_CREATES:-120}
CLIENTS=${CLUSTER_BENCH_CLIENTS:-8}
WORK=$(mktemp -d /tmp/space-cluster-bench-XXXXXX)
chmod 755 "$WORK"
on_exit "rm -rf '$WORK'"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# PostgreSQL: its own directory and port, trust on loopback only.
if [ "$BACKEND" = sqlite ]; then
	PG="sqlite:$WORK/cluster.db"
else
mkdir "$WORK/pg" && chown postgres "$WORK/pg"
PGPORT=$(free_port)
runuser -u postgres -- "$PGBIN/initdb" -D "$WORK/pg/data" -A trust -U postgres >"$WORK/initdb.log" 2>&1 ||
	fail "initdb: $(tail -3 "$WORK/initdb.log")"
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/pg/data" -l "$WORK/pg/log" -w \
	-o "-k $WORK/pg -h 127.0.0.1 -p $PGPORT -c fsync=off" start >/dev/null || fail "PostgreSQL did not start: $(tail -5 "$WORK/pg/log")"
on_exit "runuser -u postgres -- '$PGBIN/pg_ctl' -D '$WORK/pg/data' -m immediate stop >/dev/null"
PG="host=127.0.0.1 port=$PGPORT user=postgres dbname=postgres"
fi

make_busybox_tree "$WORK/tree"
declare -A ST
for h in a b c solo; do
	make_state 2G
	ST[$h]=$STATE
	expect_rc 0 "$SPACE" init --isolation jail --state "$STATE"
	expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" --state "$STATE"
done
expect_rc 0 "$SPACE" apikey create --name bench --state "${ST[a]}"
KEY=$out
expect_rc 0 "$SPACE" apikey create --name bench --state "${ST[solo]}"
KEY_SOLO=$out

# start NAME PORT ARGS...: a server on 127.0.0.1:PORT; URL[NAME] set once it answers.
declare -A URL PID
start() {
	local h=$1 port=$2 i
	shift 2
	"$SPACE" serve --listen "127.0.0.1:$port" --state "${ST[$h]}" "$@" >"$WORK/$h.log" 2>"$WORK/$h.err" &
	PID[$h]=$!
	on_exit "kill_ours ${PID[$h]} 2>/dev/null; wait ${PID[$h]} 2>/dev/null"
	URL[$h]="http://127.0.0.1:$port"
	for i in $(seq 100); do
		curl -sf "${URL[$h]}/v1/health" >/dev/null 2>&1 && return 0
		kill -0 "${PID[$h]}" 2>/dev/null || fail "server $h exited: $(cat "$WORK/$h.err")"
		sleep 0.1
	done
	fail "server $h did not answer"
}
start solo "$(free_port)"
expect_rc 0 "$SPACE" cluster ca "$WORK/ca"
for h in a b c; do
	expect_rc 0 "$SPACE" cluster cert "$h" --ca "$WORK/ca" --out "$WORK/tls-$h"
	tport=$(free_port)
	start "$h" "$(free_port)" --cluster "$PG" --cluster-host "$h" --cluster-listen "127.0.0.1:$tport" \
		--cluster-url "https://127.0.0.1:$tport" --cluster-tls "$WORK/tls-$h" \
		--cluster-capacity 200 --cluster-heartbeat 1 --cluster-lost-after 5
done
# Every host's key hash is published (a's key opens b and c) within a heartbeat.
for i in $(seq 50); do
	curl -sf -H "X-API-Key: $KEY" "${URL[c]}/v1/sandboxes" >/dev/null && break
	sleep 0.2
done

load() { python3 "$(dirname "$0")/cluster_load.py" "$@"; }
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
# 1. one client: latency alone vs through host a of the cluster
solo1=$(load "${URL[solo]}" "$KEY_SOLO" "$N" 1 tiny) || fail "load on the single host failed"
clu1=$(load "${URL[a]}" "$KEY" "$N" 1 tiny a) || fail "load on the cluster failed"
# 2. CLIENTS clients: rate of one host alone vs three (clients spread over them)
soloN=$(load "${URL[solo]}" "$KEY_SOLO" "$N" "$CLIENTS" tiny) || fail "load on the single host failed"
cluN=$(load "${URL[a]},${URL[b]},${URL[c]}" "$KEY" "$N" "$CLIENTS" tiny) || fail "load on the cluster failed"
for r in "$solo1" "$clu1" "$soloN" "$cluN"; do
	[ "$(field "$r" errors)" = "[]" ] || fail "errors: $r"
	[ "$(field "$r" creates)" = "$N" ] || fail "not every create succeeded: $r"
done
# Placement time per create, from the hosts' access logs (creates through a, b and c).
place=$(cat "$WORK"/a.log "$WORK"/b.log "$WORK"/c.log | python3 -c '
import json, sys
v = sorted(json.loads(l)["place_ms"] for l in sys.stdin if "place_ms" in l)
print(len(v), v[len(v) // 2], v[min(len(v) - 1, int(len(v) * 0.99))]) if v else print(0, 0, 0)')
read -r n_place place_p50 place_p99 <<<"$place"
[ "$n_place" -ge "$N" ] || fail "only $n_place placements logged for $((2 * N)) creates"

printf '%-44s %10s %10s %10s\n' "" "alone" "cluster" "ratio"
ratio() { python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print(f'{b / a:.2f}x' if a else '-')" "$1" "$2"; }
for m in p50_ms p99_ms; do
	a=$(field "$solo1" $m); b=$(field "$clu1" $m)
	printf '%-44s %10s %10s %10s\n' "create $m, 1 client" "$a" "$b" "$(ratio "$a" "$b")"
done
a=$(field "$soloN" per_s); b=$(field "$cluN" per_s)
printf '%-44s %10s %10s %10s\n' "creates per second, $CLIENTS clients" "$a" "$b" "$(ratio "$a" "$b")"
echo "placement (cluster_place) per create: p50 $place_p50 ms, p99 $place_p99 ms over $n_place creates"
get_local=$(field "$clu1" get_local_p50_ms); get_fwd=$(field "$clu1" get_forwarded_p50_ms)
echo "GET of a sandbox through a, p50: $get_local ms when a owns it, $get_fwd ms when a forwards it ($(field "$clu1" gets) reads)"
echo "owners, $CLIENTS clients over three hosts: $(field "$cluN" owners)"
echo "cluster: backend=$BACKEND place_p50_ms=$place_p50 place_p99_ms=$place_p99 create_p50_ms=$(field "$clu1" p50_ms)" \
	"alone_create_p50_ms=$(field "$solo1" p50_ms) creates_per_s=$b alone_creates_per_s=$a creates=$((4 * N))" \
	"get_local_p50_ms=$get_local get_forwarded_p50_ms=$get_fwd"
