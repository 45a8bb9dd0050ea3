#!/bin/bash
# `space serve --cluster`: three hosts (a, b, c) sharing one PostgreSQL (or, with the argument `sqlite`, one
# SQLite file: the other back-end, the same checks), each in a network namespace of its own joined by a
# bridge, as separate machines would be. It checks what a user of the cluster sees:
#  - an API key made on a is accepted by b;
#  - 100 creates sent to a are spread by capacity (a 100, b 50, c 50: 50, 25 and 25 of them) and each host
#    really runs the sandboxes the cluster says it owns (`space cluster ls` against each state's `space ls`);
#  - the E2B SDK pointed at b works on a sandbox living on c (cluster_e2b.mjs) and creates through b; a port
#    of that sandbox answers through b, an Upgrade (WebSocket) too;
#  - listings through any host (native, paged, and E2B) hold every host's sandboxes;
#  - forwarded requests keep their connections between hosts (20 reads, at most 2 new connections);
#  - a template only a holds: placed on a; pushed from a to b and pulled by c from a, then placed anywhere;
#  - host c lost (server killed, link down): c and its sandboxes are "lost" within the lost-after delay,
#    new creates avoid c, a lost sandbox answers 503 host_lost, a DELETE of one answers 202 (destroyed);
#  - c back: its sandboxes are "running" again, the one the cluster gave up on is destroyed on c;
#  - a checkpoint of c's sandbox made through b is read, forked and deleted by its id through a;
#  - PostgreSQL cut off, then stopped (SQLite: its file held locked by another process): a create answers
#    503 cluster_unavailable quickly, local sandboxes still answer; once it is reachable again, creates work
#    again;
#  - the servers stop on SIGTERM and nothing is left behind.
# Jail isolation. Needs root, btrfs, loop devices, network namespaces, PostgreSQL's server binaries and
# node with the e2b SDK (installed once into /var/cache/space/npm like the other E2B tests).
. "$(dirname "$0")/../../lib.sh"
need_root; need_btrfs; need_loop
need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
for c in python3 curl ip nsenter; do command -v $c >/dev/null || skip "$c missing"; done
"$SPACE" serve --help >/dev/null 2>&1 || skip "space built without libmicrohttpd"
BACKEND=${1:-postgresql}
case $BACKEND in
postgresql) STORE=PostgreSQL ;;
sqlite) STORE="the SQLite store" ;;
*) fail "unknown back-end '$BACKEND' (postgresql, sqlite)" ;;
esac
PGBIN=
for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && PGBIN=$d; done
[ "$BACKEND" = sqlite ] || [ -n "$PGBIN" ] || skip "postgresql missing (scripts/deps.sh installs it)"
need_sdk 'e2b@2'
export SPACE_QUIET_JAIL=1

CHECKS=0
ok() { CHECKS=$((CHECKS + 1)); echo "ok   $*"; }
WORK=$(mktemp -d /tmp/space-cluster-XXXXXX)
on_exit "rm -rf '$WORK'"

# in_ns NS CMD...: CMD in the network namespace NS only. Not `ip netns exec`: it also mounts a fresh /sys,
# without the cgroup trees under /sys/fs/cgroup that jails need.
in_ns() { nsenter --net="/run/netns/$1" -- "${@:2}"; }

# --- network: a hub namespace with a bridge; pg, a, b, c each on it through a veth pair ------------------
NET=10.$((100 + $$ % 100)).$(($$ / 100 % 250 + 1))
HUB=spc$$hub
declare -A NS IP VETH
for h in pg a b c; do NS[$h]=spc$$$h VETH[$h]=vc$$$h; done
IP[pg]=$NET.10 IP[a]=$NET.11 IP[b]=$NET.12 IP[c]=$NET.13
ip netns add "$HUB" || skip "cannot create network namespaces"
on_exit "ip netns del '$HUB'"
ip -n "$HUB" link add br0 type bridge || skip "no bridge support"
ip -n "$HUB" addr add "$NET.1/24" dev br0
ip -n "$HUB" link set br0 up
ip -n "$HUB" link set lo up
for h in pg a b c; do
	ip netns add "${NS[$h]}" || fail "ip netns add ${NS[$h]}"
	on_exit "ip netns del '${NS[$h]}'"
	# Both ends made where they live: the host's own namespace never sees them.
	ip -n "$HUB" link add "${VETH[$h]}" type veth peer name eth0 netns "${NS[$h]}" || skip "no veth support"
	ip -n "$HUB" link set "${VETH[$h]}" master br0 up
	ip -n "${NS[$h]}" addr add "${IP[$h]}/24" dev eth0
	ip -n "${NS[$h]}" link set eth0 up
	ip -n "${NS[$h]}" link set lo up
done

# --- PostgreSQL in its namespace, run by an unprivileged user, its files in a temp dir -------------------
if [ "$BACKEND" = sqlite ]; then
	CONNINFO="sqlite:$WORK/cluster.db"
else
PGUSER=postgres
id postgres >/dev/null 2>&1 || PGUSER=nobody
PGDIR=$(mktemp -d /tmp/space-pg-XXXXXX)
on_exit "rm -rf '$PGDIR'"
chown "$PGUSER:" "$PGDIR"
pg() { (cd "$PGDIR" && in_ns "${NS[pg]}" runuser -u "$PGUSER" -- "$PGBIN/$1" "${@:2}"); }
pg initdb -D "$PGDIR/data" -U postgres --auth=trust --locale=C -E UTF8 >"$PGDIR/initdb.log" 2>&1 ||
	fail "initdb: $(tail -5 "$PGDIR/initdb.log")"
cat >>"$PGDIR/data/postgresql.conf" <<EOF
listen_addresses = '${IP[pg]}'
port = 5432
unix_socket_directories = '$PGDIR'
fsync = off
max_connections = 200
EOF
echo "host all all $NET.0/24 trust" >>"$PGDIR/data/pg_hba.conf"
pg pg_ctl -D "$PGDIR/data" -l "$PGDIR/pg.log" -w -t 60 start >/dev/null ||
	fail "PostgreSQL did not start: $(tail -5 "$PGDIR/pg.log")"
on_exit "(cd '$PGDIR' && in_ns '${NS[pg]}' runuser -u '$PGUSER' -- '$PGBIN/pg_ctl' -D '$PGDIR/data' -m immediate -w stop)"
# reach_pg NS: PostgreSQL's port answers from NS (a link just up takes a moment: 10 s to).
reach_pg() {
	local i
	for i in $(seq 20); do
		in_ns "$1" python3 -c 'import socket, sys; socket.create_connection((sys.argv[1], 5432), timeout=1)' \
			"${IP[pg]}" 2>/dev/null && return 0
		sleep 0.5
	done
	fail "the test network: PostgreSQL not reached from $1"
}
# The test network works: PostgreSQL is reached from the hub and from every host.
for ns in "$HUB" "${NS[a]}" "${NS[b]}" "${NS[c]}"; do reach_pg "$ns"; done
CONNINFO="host=${IP[pg]} port=5432 dbname=postgres user=postgres connect_timeout=2"
fi

# --- three hosts' state directories, each with the busybox tree as "tiny" and "base" ----------------------
make_busybox_tree "$WORK/tree"
declare -A ST PID CAP URL CURL
# Capacities 2:1:1 with room to spare: a host at its capacity takes no more, and the creates while c is
# lost must still find room on a and b.
CAP[a]=100 CAP[b]=50 CAP[c]=50
for h in a b c; do
	make_state 4G
	ST[$h]=$STATE
	# Before make_state's own per-id removal: one `space rm --all` is quicker for a hundred sandboxes.
	on_exit "'$SPACE' rm --all -f --state '$STATE'"
	expect_rc 0 "$SPACE" init --isolation jail --state "$STATE"
	expect_rc 0 "$SPACE" template import tiny --rootfs "$WORK/tree" --state "$STATE"
	expect_rc 0 "$SPACE" template import base --rootfs "$WORK/tree" --state "$STATE"
	URL[$h]=http://${IP[$h]}:8080    # the API
	CURL[$h]=https://${IP[$h]}:9443  # host to host, over TLS
done
# The cluster's CA and each host's certificate.
expect_rc 0 "$SPACE" cluster ca "$WORK/ca"
for h in a b c; do expect_rc 0 "$SPACE" cluster cert "$h" --ca "$WORK/ca" --out "$WORK/tls-$h"; done

# diag: the servers' last words, for failure messages.
diag() {
	local h
	for h in a b c; do echo "[$h: $(tail -4 "$WORK/$h.err" 2>/dev/null | tr '\n' ' ')]"; done
}

# stop_servers: SIGTERM to the servers still running (SIGKILL 30 s later); each pid is ours, a child.
stop_servers() {
	local h
	for h in a b c; do
		[ -n "${PID[$h]:-}" ] || continue
		stop_pid "${PID[$h]}" 30
		PID[$h]=
	done
}
on_exit stop_servers

# start_host NAME: NAME's server in its namespace (appending to $WORK/NAME.err), up once /v1/health answers.
start_host() {
	local h=$1 i
	# nsenter itself, not in_ns: a backgrounded function would be a subshell, and $! not the server.
	# c lists its templates as a host of the version before template streams did (no ids; a test build's
	# switch): hosts of two versions side by side, as in a rolling upgrade.
	local old=()
	[ "$h" = c ] && old=(SPACE_TEST_CLUSTER_LIST_NO_IDS=1)
	nsenter --net="/run/netns/${NS[$h]}" -- env "${old[@]}" "$SPACE" serve --listen "${IP[$h]}:8080" --state "${ST[$h]}" \
		--cluster "$CONNINFO" --cluster-host "$h" --cluster-listen "${IP[$h]}:9443" --cluster-url "${CURL[$h]}" \
		--cluster-tls "$WORK/tls-$h" --cluster-capacity "${CAP[$h]}" --cluster-heartbeat 1 --cluster-lost-after 4 \
		>>"$WORK/$h.access.log" 2>>"$WORK/$h.err" &
	PID[$h]=$!
	for i in $(seq 300); do
		in_ns "${NS[$h]}" curl -sf -m 2 "${URL[$h]}/v1/health" >/dev/null 2>&1 && return 0
		kill -0 "${PID[$h]}" 2>/dev/null || fail "space serve on $h exited: $(tail -20 "$WORK/$h.err")"
		sleep 0.1
	done
	fail "space serve on $h did not answer on ${URL[$h]}: $(tail -20 "$WORK/$h.err")"
}

# http HOST METHOD PATH [JSON]: one request from HOST's namespace to HOST's server with the API key;
# sets HS (status, 000 when none within HTTP_MAX seconds, default 60), HB (body) and HH (the response's headers).
http() {
	local h=$1 args=(-s -m "${HTTP_MAX:-60}" -X "$2" -o "$WORK/http.body" -D "$WORK/http.hdr" -w '%{http_code}')
	[ -n "${KEY:-}" ] && args+=(-H "X-API-Key: $KEY")
	[ $# -ge 4 ] && args+=(-H 'Content-Type: application/json' --data "$4")
	: >"$WORK/http.body"; : >"$WORK/http.hdr"
	HS=$(in_ns "${NS[$h]}" curl "${args[@]}" "${URL[$h]}$3")
	HB=$(cat "$WORK/http.body"); HH=$(cat "$WORK/http.hdr")
}
# err_code: the error code of the JSON answer in $HB.
err_code() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])["error"]["code"])' "$HB" 2>/dev/null; }
# owner_header: the X-Space-Cluster-Host of the answer in $HH.
owner_header() { grep -i '^X-Space-Cluster-Host:' <<<"$HH" | tail -1 | cut -d: -f2 | tr -d ' \r'; }

# cluster WHAT: `space cluster WHAT --json` (from the hub: the bridge reaches PostgreSQL) into $WORK/WHAT.json;
# ls with --all: destroyed sandboxes too.
cluster() {
	local all=()
	[ "$1" = ls ] && all=(--all)
	in_ns "$HUB" "$SPACE" cluster "$1" "${all[@]}" --cluster "$CONNINFO" --json >"$WORK/$1.json" 2>"$WORK/$1.err" ||
		fail "space cluster $1: $(cat "$WORK/$1.err")"
}
# jq_ FILE EXPR: the Python expression EXPR over the JSON document d of FILE; a list prints one item a line.
jq_() {
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
v = eval(sys.argv[2])
print("\n".join(map(str, v)) if isinstance(v, (list, tuple, set)) else v)' "$1" "$2"
}
# ids_of HOST STATE: sorted ids `space cluster ls` (read last) shows on HOST in STATE.
ids_of() { jq_ "$WORK/ls.json" "sorted(s['id'] for s in d if s['host'] == '$1' and s['state'] == '$2')"; }
# local_running HOST: sorted ids `space ls` of HOST's state directory shows running.
local_running() {
	"$SPACE" ls --json --state "${ST[$1]}" >"$WORK/local.json" || fail "space ls on $1's state"
	jq_ "$WORK/local.json" "sorted(s['id'] for s in d if s['status'] == 'running')"
}
host_field() { jq_ "$WORK/hosts.json" "[x['$2'] for x in d if x['name'] == '$1'][0]"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# --- the three servers; an API key made on a, accepted by every host -------------------------------------
KEY=
for h in a b c; do start_host "$h"; done
cluster hosts
for h in a b c; do
	[ "$(host_field "$h" state)" = up ] && [ "$(host_field "$h" capacity)" = "${CAP[$h]}" ] &&
		[ "$(host_field "$h" url)" = "${CURL[$h]}" ] || fail "host $h not registered as up: $(cat "$WORK/hosts.json")"
done
[ "$(jq_ "$WORK/hosts.json" "all(x['heartbeat_age_s'] < 3 for x in d)")" = True ] ||
	fail "heartbeats older than 3 s: $(cat "$WORK/hosts.json")"
ok "three hosts registered, up, with their url and capacity, heartbeating"
expect_rc 0 "$SPACE" apikey create --name cluster --state "${ST[a]}"
KEY=$out
echo "$KEY" | grep -Eq '^e2b_[0-9a-f]{64}$' || fail "API key format: $KEY"
for h in a b c; do
	for i in $(seq 100); do
		http "$h" GET /v1/templates
		[ "$HS" = 200 ] && break
		sleep 0.1
	done
	[ "$HS" = 200 ] || fail "host $h does not accept a's key after 10 s: $HS $HB $(diag)"
done
ok "the API key made on a is accepted by a, b and c"
KEY=e2b_$(printf '%064d' 0) http b GET /v1/templates
[ "$HS" = 401 ] || fail "b with a key nobody made: $HS $HB"
ok "b refuses a key nobody made: 401"

# --- 100 creates through a, four at a time --------------------------------------------------------------
mkdir "$WORK/c"
t0=$(now_ms)
seq 100 | in_ns "${NS[a]}" xargs -P4 -I{} curl -s -m 120 -X POST -H "X-API-Key: $KEY" \
	-H 'Content-Type: application/json' --data '{"template":"tiny"}' -o "$WORK/c/{}.body" -D "$WORK/c/{}.hdr" \
	-w '%{http_code}\n' "${URL[a]}/v1/sandboxes" >"$WORK/c/status"
echo "100 creates through a in $(($(now_ms) - t0)) ms"
n201=$(grep -cx 201 "$WORK/c/status")
[ "$n201" = 100 ] || fail "creates through a: $n201 of 100 answered 201 ($(sort "$WORK/c/status" | uniq -c | tr '\n' ' ')
	$(grep -L '"id"' "$WORK"/c/*.body | head -3 | xargs cat) $(diag))"
ok "100 creates through a answered 201"
# Each create's id and the owner its answer names.
python3 - "$WORK/c" >"$WORK/created" <<'PY' || fail "create answers: $(head -3 "$WORK/created")"
import json, os, sys
d = sys.argv[1]
for i in range(1, 101):
    sid = json.load(open(f"{d}/{i}.body"))["id"]
    owner = [l.split(":", 1)[1].strip() for l in open(f"{d}/{i}.hdr") if l.lower().startswith("x-space-cluster-host:")]
    print(sid, owner[-1] if owner else "-")
PY
[ "$(cut -d' ' -f1 "$WORK/created" | sort -u | wc -l)" = 100 ] || fail "100 distinct ids: $(cat "$WORK/created")"
# created_in_ls FILE HOSTS: every "ID OWNER" line of FILE is in cluster ls, running template tiny on OWNER,
# which is one of HOSTS (space-separated).
created_in_ls() {
	cluster ls
	python3 - "$1" "$WORK/ls.json" "$2" <<'PY'
import json, sys
cl = {s["id"]: s for s in json.load(open(sys.argv[2]))}
hosts = sys.argv[3].split()
for line in open(sys.argv[1]):
    sid, owner = line.split()
    s = cl.get(sid)
    if not s or s["state"] != "running" or s["host"] != owner or s["host"] not in hosts or s["template"] != "tiny":
        sys.exit(f"{sid} (X-Space-Cluster-Host {owner}): cluster ls has {s}")
PY
}
created_in_ls "$WORK/created" "a b c" || fail "cluster ls against the creates' answers"
ok "cluster ls: every sandbox running, on the host its create's X-Space-Cluster-Host named"
for h in a b c; do ids_of "$h" running >"$WORK/$h.ids"; done
na=$(wc -l <"$WORK/a.ids") nb=$(wc -l <"$WORK/b.ids") nc=$(wc -l <"$WORK/c.ids")
echo "spread: a $na, b $nb, c $nc"
[ "$na" -ge 46 ] && [ "$na" -le 54 ] && [ "$nb" -ge 21 ] && [ "$nb" -le 29 ] && [ "$nc" -ge 21 ] && [ "$nc" -le 29 ] ||
	fail "spread by capacity 100/50/50: a $na, b $nb, c $nc (wanted 50/25/25 +-4)"
ok "spread by capacity 100/50/50: a $na, b $nb, c $nc (50/25/25 +-4)"
for h in a b c; do
	local_running "$h" >"$WORK/$h.local"
	diff "$WORK/$h.ids" "$WORK/$h.local" >"$WORK/diff" ||
		fail "host $h runs other sandboxes than the cluster says: $(cat "$WORK/diff")"
done
ok "each host's state runs exactly the sandboxes cluster ls gives it"
# Hosts report their counts with their heartbeats: a few seconds for them to catch up.
for i in $(seq 10); do
	cluster hosts
	lives="$(host_field a live) $(host_field b live) $(host_field c live)"
	[ "$lives" = "$na $nb $nc" ] && break
	sleep 0.5
done
[ "$lives" = "$na $nb $nc" ] || fail "cluster hosts: live a b c $lives 5 s later, they run $na $nb $nc"
ok "cluster hosts: each host's live count is what it runs"

# --- listings through any host cover every host: whole, in pages, on both planes ---------------------------
all_running=$(cat "$WORK/a.ids" "$WORK/b.ids" "$WORK/c.ids" | sort)
http b GET "/v1/sandboxes?limit=1000"
[ "$HS" = 200 ] || fail "list through b: $HS $HB"
listed=$(python3 -c 'import json,sys; print("\n".join(sorted(s["id"] for s in json.loads(sys.argv[1])["sandboxes"])))' "$HB")
[ "$listed" = "$all_running" ] || fail "GET /v1/sandboxes through b is not the 100 of the three hosts: $(wc -l <<<"$listed")"
# Pages of 30 through c: every sandbox once, in (created_ms, id) order, then no cursor.
cursor= pages=0
: >"$WORK/paged"
while :; do
	http c GET "/v1/sandboxes?limit=30${cursor:+&cursor=$cursor}"
	[ "$HS" = 200 ] || fail "page $pages through c: $HS $HB"
	cursor=$(python3 - "$HB" "$WORK/paged" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
with open(sys.argv[2], "a") as f:
    for s in d["sandboxes"]:
        f.write("%d %s\n" % (s["created_ms"], s["id"]))
print(d["next_cursor"] or "")
PY
)
	pages=$((pages + 1))
	[ -n "$cursor" ] && [ $pages -lt 10 ] || break
done
[ $pages = 4 ] || fail "100 sandboxes in pages of 30: $pages pages"
[ "$(sort -n -k1,1 -k2,2 "$WORK/paged" | uniq)" = "$(cat "$WORK/paged")" ] || fail "the pages are not in order, or repeat"
[ "$(cut -d' ' -f2 "$WORK/paged" | sort)" = "$all_running" ] || fail "the pages do not hold the 100 sandboxes once each"
http a GET "/v2/sandboxes"
[ "$HS" = 200 ] || fail "E2B list through a: $HS $HB"
listed=$(python3 -c 'import json,sys; print("\n".join(sorted(s["sandboxID"] for s in json.loads(sys.argv[1]) if "spaceCreatedMs" not in s)))' "$HB")
[ "$listed" = "$all_running" ] || fail "GET /v2/sandboxes through a is not the 100 of the three hosts"
ok "listings through any host hold every host's sandboxes: whole, in 4 ordered pages, and on the E2B plane"

# --- forwarded requests keep their connections: 20 reads through a of a sandbox on c take at most 2 new
# TCP connections from a to c (each would take one of its own otherwise); every answer is whole ----------
ports_to_c() { in_ns "${NS[a]}" ss -Htan "dst ${IP[c]}:9443" | awk '{print $4}' | sort -u; }
ports_to_c >"$WORK/ports.before"
KEEP_ID=$(sed -n 3p "$WORK/c.ids")
for i in $(seq 20); do
	http a GET "/v1/sandboxes/$KEEP_ID"
	[ "$HS" = 200 ] && [ "$(owner_header)" = c ] &&
		python3 -c 'import json,sys; assert json.loads(sys.argv[1])["id"] == sys.argv[2]' "$HB" "$KEEP_ID" ||
		fail "read $i of c's sandbox through a: $HS $(owner_header) $HB"
done
new_conns=$(ports_to_c | comm -13 "$WORK/ports.before" - | wc -l)
[ "$new_conns" -le 2 ] || fail "20 reads through a of a sandbox on c took $new_conns new connections to c"
ok "20 reads through a of c's sandbox: whole answers over $new_conns new connection(s) to c (kept between hosts)"

# --- a registered secret only c has: creates whose policy names it go to c; one nobody has is refused -------
# (set with c's server running: its next heartbeat reports the name, never the value)
printf 'pypi-token-value' >"$WORK/secret"
expect_rc 0 "$SPACE" secret set pypi --from-file "$WORK/secret" --state "${ST[c]}"
POLICY='"network":{"allow":["pypi.org"],"secrets":{"PYPI":"secret:pypi"},"inject":[{"host":"pypi.org","header":"Authorization","value":"Bearer ${PYPI}"}]}'
t0=$(now_ms)
while :; do
	http a POST /v1/sandboxes "{\"template\":\"tiny\",$POLICY}"
	[ "$HS" = 201 ] && break
	[ $(($(now_ms) - t0)) -lt 10000 ] || fail "a create naming c's secret, through a: $HS $HB $(diag)"
	sleep 0.25
done
sid=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["id"])' "$HB")
[ "$(owner_header)" = c ] || fail "a create naming secret pypi went to $(owner_header), not c (the only host with it)"
for i in 1 2 3; do
	http b POST /v1/sandboxes "{\"template\":\"tiny\",$POLICY}"
	[ "$HS" = 201 ] && [ "$(owner_header)" = c ] || fail "create $i naming secret pypi through b: $HS $(owner_header) $HB"
	sid="$sid $(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["id"])' "$HB")"
done
for i in $sid; do
	http a DELETE "/v1/sandboxes/$i"
	[ "$HS" = 204 ] || [ "$HS" = 200 ] || fail "delete $i through a: $HS $HB"
	echo "$i c" >>"$WORK/created.secret"
done
http a POST /v1/sandboxes '{"template":"tiny","network":{"allow":["pypi.org"],"secrets":{"X":"secret:nobody-has"}}}'
[ "$HS" = 404 ] && [ "$(err_code)" = not_found ] && grep -q "space secret set" <<<"$HB" ||
	fail "a create naming a secret no host has: $HS $HB"
"$SPACE" secret ls --state "${ST[a]}" | grep -q pypi && fail "the secret reached a"
grep -rqs 'pypi-token-value' "$WORK"/*.err "$WORK"/*.log && fail "the secret's value is in a server's log"
ok "creates naming secret pypi (only c has it) went to c, 4 of 4; one naming a secret nobody has: 404 naming space secret set"

# --- a template only a holds: creates go to a; pushed to b, pulled by c; then creates go anywhere ----------
# (imported with a's server running: its next heartbeat reports it)
"$SPACE" template import solo --rootfs "$WORK/tree" --state "${ST[a]}" >/dev/null 2>&1 || fail "import solo on a"
for i in $(seq 20); do
	http b POST /v1/sandboxes '{"template":"solo"}'
	[ "$HS" = 201 ] && break
	sleep 0.25
done
[ "$HS" = 201 ] && [ "$(owner_header)" = a ] || fail "a create of solo (only a holds it) through b: $HS $(owner_header) $HB"
SOLO1=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["id"])' "$HB")
# The push through the CLI (asked of a's API, the key from the environment), the pull through the API.
HB=$(in_ns "${NS[a]}" env SPACE_API_KEY="$KEY" "$SPACE" --json template push solo b --server "${URL[a]}" 2>&1) ||
	fail "space template push solo b: $HB $(diag)"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["host"]=="b" and d["bytes"]>0 and d["template"]["name"]=="solo" and d["as"]=="whole stream" and d["parent"] is None, d' "$HB" ||
	fail "push answer: $HB"
SOLO_BYTES=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["bytes"])' "$HB")
http c POST /v1/templates/solo/pull '{"from":"a"}'
[ "$HS" = 201 ] || fail "pull solo by c from a: $HS $HB $(diag)"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["as"]=="image" and d["template"]["name"]=="solo", d' "$HB" ||
	fail "c (listing no ids, as the previous version) did not get solo as an image: $HB"
out=$(in_ns "${NS[b]}" env SPACE_API_KEY="$KEY" "$SPACE" template push solo nosuchhost --server "${URL[b]}" 2>&1) &&
	fail "space template push to an unknown host succeeded: $out"
grep -q "404" <<<"$out" && grep -q nosuchhost <<<"$out" || fail "space template push to an unknown host: $out"
out=$(in_ns "${NS[b]}" env SPACE_API_KEY=wrong "$SPACE" template pull solo a --server "${URL[b]}" 2>&1) &&
	fail "space template pull with a wrong key succeeded: $out"
grep -q "401" <<<"$out" || fail "space template pull with a wrong key: $out"
for h in b c; do
	expect_rc 0 "$SPACE" template ls --json --state "${ST[$h]}"
	grep -q '"solo"' <<<"$out" || fail "solo is not a template of $h after the push/pull: $out"
done
http b POST /v1/templates/solo/push '{"to":"nosuchhost"}'
[ "$HS" = 404 ] || fail "push to an unknown host: $HS $HB"
# With all three holding it (after a heartbeat), creates of solo spread again.
sleep 2
: >"$WORK/solo.owners"
for i in $(seq 6); do
	http a POST /v1/sandboxes '{"template":"solo"}'
	[ "$HS" = 201 ] || fail "create of solo once everywhere: $HS $HB"
	owner_header >>"$WORK/solo.owners"
	SOLOS="${SOLOS:-} $(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["id"])' "$HB")"
done
[ "$(sort -u "$WORK/solo.owners" | wc -l)" -ge 2 ] || fail "creates of solo after the push and pull all went to $(sort -u "$WORK/solo.owners")"
for id in $SOLO1 $SOLOS; do
	http a DELETE "/v1/sandboxes/$id"
	[ "$HS" = 204 ] || [ "$HS" = 200 ] || fail "delete $id: $HS $HB"
done
ok "a template only a holds: creates went to a; pushed to b (space template push), pulled by c, then creates spread"

# --- a template built on a from solo goes to b as what differs from solo (b's solo came from a) --------------
mkdir -p "$WORK/solo2"
printf 'FROM solo\nRUN echo built-on-a > /etc/solo2-note\n' >"$WORK/solo2/Dockerfile"
"$SPACE" template build solo2 "$WORK/solo2" --isolation jail --state "${ST[a]}" >"$WORK/solo2.log" 2>&1 ||
	fail "build solo2 on a: $(tail -5 "$WORK/solo2.log")"
HB=$(in_ns "${NS[a]}" env SPACE_API_KEY="$KEY" "$SPACE" --json template push solo2 b --server "${URL[a]}" 2>&1) ||
	fail "space template push solo2 b: $HB $(diag)"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["as"]=="stream" and d["parent"]=="solo" and 0 < d["bytes"] < int(sys.argv[2]) / 2, d' "$HB" "$SOLO_BYTES" ||
	fail "push of solo2 to b (solo: $SOLO_BYTES bytes whole): $HB"
SOLO2_BYTES=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["bytes"])' "$HB")
HB=$(in_ns "${NS[a]}" env SPACE_API_KEY="$KEY" "$SPACE" --json template push solo2 c --server "${URL[a]}" 2>&1) ||
	fail "space template push solo2 c: $HB $(diag)"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["as"]=="image" and d["parent"] is None and d["template"]["name"]=="solo2", d' "$HB" ||
	fail "push of solo2 to c (listing no ids, as the previous version): $HB"
for h in b c; do
	out=$("$SPACE" run --state "${ST[$h]}" --isolation jail --template solo2 -- cat /etc/solo2-note 2>"$WORK/solo2-$h.err") &&
		[ "$out" = built-on-a ] || fail "solo2 on $h: $out $(tail -3 "$WORK/solo2-$h.err")"
done
ok "solo2, built on a from solo: to b as what differs from solo ($SOLO2_BYTES bytes; solo whole: $SOLO_BYTES), to c (a host of the previous version: no ids) as an image"

# --- every host holding a template is full: a create goes to a host with room, which pulls it first --------
# (a is filled by placement claims written into the store: capacity counts running sandboxes and claims)
"$SPACE" template import solo3 --rootfs "$WORK/tree" --state "${ST[a]}" >/dev/null 2>&1 || fail "import solo3 on a"
store_sql() { # store_sql SQL: run on the cluster's store (the test's own, as its operator would)
	if [ "$BACKEND" = sqlite ]; then
		python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1], timeout=10, isolation_level=None); c.executescript(sys.argv[2])' \
			"$WORK/cluster.db" "$1"
	else
		pg psql -h "$PGDIR" -U postgres -d postgres -q -c "$1" >/dev/null
	fi
}
if [ "$BACKEND" = sqlite ]; then
	FILL="WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${CAP[a]})
	      INSERT INTO space_placements (token, host, expires)
	      SELECT 'fill-' || i, 'a', (julianday('now') - 2440587.5) * 86400.0 + 300 FROM n;"
else
	FILL="INSERT INTO space_placements (token, host, expires)
	      SELECT 'fill-' || i, 'a', now() + interval '300 seconds' FROM generate_series(1, ${CAP[a]}) i;"
fi
store_sql "$FILL" || fail "fill a with claims"
sleep 1.5 # a's heartbeat reports solo3
http b POST /v1/sandboxes '{"template":"solo3"}'
PULLED=$(grep -i '^X-Space-Cluster-Pull:' <<<"$HH" | tail -1 | cut -d: -f2- | tr -d '\r')
store_sql "DELETE FROM space_placements WHERE token LIKE 'fill-%';" || fail "remove the claims"
[ "$HS" = 201 ] || fail "a create of solo3 with a full: $HS $HB $(diag)"
OWNER=$(owner_header)
[ "$OWNER" = b ] || [ "$OWNER" = c ] || fail "solo3 with a full went to '$OWNER'"
grep -q '^ *a; ms=[0-9]' <<<"$PULLED" || fail "the create does not say it pulled solo3 from a: '$PULLED' ($HH)"
SOLO3=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["id"])' "$HB")
expect_rc 0 "$SPACE" template ls --json --state "${ST[$OWNER]}"
grep -q '"solo3"' <<<"$out" || fail "solo3 is not a template of $OWNER after the pull"
http a DELETE "/v1/sandboxes/$SOLO3"
[ "$HS" = 204 ] || [ "$HS" = 200 ] || fail "delete $SOLO3: $HS $HB"
ok "solo3 only on a, a full: the create went to $OWNER, which pulled solo3 from a first (X-Space-Cluster-Pull:$PULLED)"

# --- the E2B SDK against b, on a sandbox living on c -----------------------------------------------------
E2B_ID=$(sed -n 1p "$WORK/c.ids")  # used through b
DEL_ID=$(sed -n 2p "$WORK/c.ids")  # deleted while c is lost
TEXT="written through b, kept on c $$"
script="$SDK/space-cluster_e2b-$$.mjs"
cp "$(dirname "$0")/cluster_e2b.mjs" "$script"
on_exit "rm -f '$script'"
in_ns "${NS[b]}" env E2B_API_KEY="$KEY" E2B_API_URL="${URL[b]}" E2B_SANDBOX_URL="${URL[b]}" \
	timeout 300 node "$script" "$E2B_ID" "$TEXT" >"$WORK/e2b.out" 2>&1 ||
	fail "the E2B SDK through b on c's $E2B_ID: $(tail -30 "$WORK/e2b.out") $(diag)"
cat "$WORK/e2b.out"
grep -qx "cluster_e2b: 7 checks passed" "$WORK/e2b.out" || fail "cluster_e2b.mjs did not pass its 7 checks"
ok "E2B SDK through b: connect, commands, files on c's sandbox; create and kill"
expect_rc 0 "$SPACE" exec "$E2B_ID" --state "${ST[c]}" -- cat /tmp/cluster.txt
[ "$out" = "$TEXT" ] || fail "the file written through b is not in the sandbox on c: '$out'"
ok "the file written through b is in the sandbox on c itself"
# A port of that sandbox through b: a file from its web server, and an Upgrade whose 101 and the bytes after
# it pass both ways (forwarded over the hosts' TLS, then to the port through c's agent).
expect_rc 0 "$SPACE" exec "$E2B_ID" --state "${ST[c]}" -- sh -c "$PORT_SERVERS"
http b POST "/sandboxes/$E2B_ID/connect" '{"timeout": 300}'
[ "$HS" = 200 ] || [ "$HS" = 201 ] || fail "connect through b: $HS $HB"
TOKEN=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["envdAccessToken"])' "$HB")
got=$(in_ns "${NS[b]}" curl -s -m 20 -H "E2b-Sandbox-Id: $E2B_ID" -H "E2b-Sandbox-Port: 8000" \
	-H "X-Access-Token: $TOKEN" "${URL[b]}/hello.txt")
[ "$got" = "hello from the sandbox" ] || fail "port 8000 of c's sandbox through b: '$got' $(diag)"
got=$(in_ns "${NS[b]}" python3 "$(dirname "$0")/../../upgrade_echo.py" "${IP[b]}:8080" x "$TOKEN" \
	"E2b-Sandbox-Id: $E2B_ID" "E2b-Sandbox-Port: 9000")
[ "$got" = "HTTP/1.1 101 Switching Protocols | ping over the upgrade" ] || fail "upgrade to c's sandbox through b: '$got' $(diag)"
ok "a port of c's sandbox through b: a file, and an Upgrade relayed both ways"
# The sandbox the SDK created and killed is "destroyed" in the cluster (the owner tells within a few beats).
FRESH_ID=$(sed -n 's/^cluster_e2b: created //p' "$WORK/e2b.out")
for i in $(seq 10); do
	cluster ls
	fresh=$(jq_ "$WORK/ls.json" "[s['state'] for s in d if s['id'] == '$FRESH_ID']")
	[ "$fresh" = destroyed ] && break
	sleep 0.5
done
[ "$fresh" = destroyed ] || fail "the sandbox killed through the SDK ($FRESH_ID) is '$fresh' in cluster ls 5 s later"
ok "the sandbox killed through the SDK is destroyed in cluster ls"

# --- host c lost: its server killed, its link down -------------------------------------------------------
ids_of c running >"$WORK/c.ids"
t0=$(now_ms)
kill -KILL "${PID[c]}"; wait "${PID[c]}" 2>/dev/null
PID[c]=
ip -n "$HUB" link set "${VETH[c]}" down
lost=
while [ $(($(now_ms) - t0)) -lt 9000 ]; do  # lost-after 4 + 2 heartbeats + 3 s
	cluster hosts; cluster ls
	if [ "$(host_field c state)" = lost ] && [ -z "$(ids_of c running)" ] &&
		diff -q "$WORK/c.ids" <(ids_of c lost) >/dev/null; then
		lost=$(($(now_ms) - t0)); break
	fi
	sleep 0.3
done
[ -n "$lost" ] || fail "9 s after c died: hosts $(cat "$WORK/hosts.json"); c's sandboxes:" \
	"$(jq_ "$WORK/ls.json" "[(s['id'], s['state']) for s in d if s['host'] == 'c']")"
ok "c and its $(wc -l <"$WORK/c.ids") sandboxes lost after $lost ms"
[ "$(host_field a state)" = up ] && [ "$(host_field b state)" = up ] || fail "a or b not up: $(cat "$WORK/hosts.json")"
ok "a and b still up"
local_running c >"$WORK/c.local"
diff "$WORK/c.ids" "$WORK/c.local" >"$WORK/diff" || fail "c's sandboxes do not run on c any more: $(cat "$WORK/diff")"
ok "c's lost sandboxes still run on c"
# New creates avoid c.
: >"$WORK/created2"
for i in $(seq 10); do
	http a POST /v1/sandboxes '{"template":"tiny"}'
	[ "$HS" = 201 ] || fail "create $i through a with c lost: $HS $HB $(diag)"
	sid=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["id"])' "$HB")
	echo "$sid $(owner_header)" >>"$WORK/created2"
done
grep -q ' c$' "$WORK/created2" && fail "a create went to the lost host c: $(cat "$WORK/created2")"
created_in_ls "$WORK/created2" "a b" || fail "the creates with c lost, in cluster ls"
ok "10 creates with c lost: all on a or b"
http a GET "/v1/sandboxes/$E2B_ID"
[ "$HS" = 503 ] && [ "$(err_code)" = host_lost ] || fail "GET of a lost sandbox through a: $HS $HB"
ok "GET of a lost sandbox through a: 503 host_lost"
http a DELETE "/v1/sandboxes/$DEL_ID"
[ "$HS" = 202 ] || fail "DELETE of a lost sandbox through a: $HS $HB"
cluster ls
[ "$(jq_ "$WORK/ls.json" "[s['state'] for s in d if s['id'] == '$DEL_ID']")" = destroyed ] ||
	fail "the deleted lost sandbox in cluster ls: $(jq_ "$WORK/ls.json" "[s for s in d if s['id'] == '$DEL_ID']")"
ok "DELETE of a lost sandbox through a: 202, destroyed in the cluster"

# --- c back: it reconciles ------------------------------------------------------------------------------
ip -n "$HUB" link set "${VETH[c]}" up
[ "$BACKEND" = sqlite ] || reach_pg "${NS[c]}"
start_host c
grep -vx "$DEL_ID" "$WORK/c.ids" >"$WORK/c.kept"
t0=$(now_ms) back=
while [ $(($(now_ms) - t0)) -lt 10000 ]; do
	cluster hosts; cluster ls
	if [ "$(host_field c state)" = up ] && diff -q "$WORK/c.kept" <(ids_of c running) >/dev/null &&
		! local_running c | grep -qx "$DEL_ID"; then
		back=$(($(now_ms) - t0)); break
	fi
	sleep 0.3
done
[ -n "$back" ] || fail "10 s after c came back: hosts $(cat "$WORK/hosts.json"); c's sandboxes:" \
	"$(jq_ "$WORK/ls.json" "[(s['id'], s['state']) for s in d if s['host'] == 'c']");" \
	"on c: $(local_running c | tr '\n' ' ') $(diag)"
ok "c back: its sandboxes running again, the destroyed one gone from c, after $back ms"
[ "$(jq_ "$WORK/ls.json" "[s['state'] for s in d if s['id'] == '$DEL_ID']")" = destroyed ] ||
	fail "the sandbox the cluster gave up on came back: $(jq_ "$WORK/ls.json" "[s for s in d if s['id'] == '$DEL_ID']")"
ok "the given-up sandbox stays destroyed"
http a GET "/v1/sandboxes/$E2B_ID"
[ "$HS" = 200 ] || fail "GET through a of c's sandbox once c is back: $HS $HB"
ok "c's sandbox answers through a again"

# --- a checkpoint of c's sandbox, made through b, used by its id through a ---------------------------------
http b POST "/v1/sandboxes/$E2B_ID/checkpoints" '{"name": "through-b"}'
[ "$HS" = 201 ] || fail "checkpoint of c's sandbox through b: $HS $HB $(diag)"
CP=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["id"])' "$HB")
[ "$(owner_header)" = c ] || fail "the checkpoint was not made on c: $(owner_header)"
http a GET "/v1/checkpoints/$CP"
[ "$HS" = 200 ] || fail "GET of c's checkpoint through a: $HS $HB $(diag)"
http a POST "/v1/checkpoints/$CP/fork" '{"count": 1}'
[ "$HS" = 201 ] && [ "$(owner_header)" = c ] || fail "fork of c's checkpoint through a: $HS $(owner_header) $HB $(diag)"
http a DELETE "/v1/checkpoints/$CP"
[ "$HS" = 409 ] || [ "$HS" = 204 ] || fail "delete of c's checkpoint through a: $HS $HB"
http a GET "/v1/checkpoints/cp-nosuchcheckpoint"
[ "$HS" = 404 ] || fail "an unknown checkpoint through a: $HS $HB"
ok "a checkpoint made through b on c: read, forked and deleted by its id through a"

# --- PostgreSQL unreachable: cut off first (its link down: packets dropped, nothing refused), then stopped.
# SQLite: its file held locked by another process (past the store's 5 s wait), then let go.
A_ID=$(sed -n 1p "$WORK/a.ids")
# no_db WHY: a create through a answers 503 cluster_unavailable in under 10 s; a's own sandbox still answers.
no_db() {
	local t0 took
	t0=$(now_ms)
	HTTP_MAX=20 http a POST /v1/sandboxes '{"template":"tiny"}'
	took=$(($(now_ms) - t0))
	[ "$HS" = 503 ] && [ "$(err_code)" = cluster_unavailable ] ||
		fail "create with $STORE $1: ${HB:-no answer} (status $HS after $took ms) $(diag)"
	[ "$took" -lt 10000 ] || fail "create with $STORE $1 answered after $took ms"
	ok "create with $STORE $1: 503 cluster_unavailable in $took ms"
	t0=$(now_ms)
	HTTP_MAX=20 http a GET "/v1/sandboxes/$A_ID"
	took=$(($(now_ms) - t0))
	[ "$HS" = 200 ] || fail "GET of a's own sandbox through a with $STORE $1: $HS $HB (after $took ms) $(diag)"
	ok "a's own sandbox answers through a with $STORE $1 (in $took ms)"
}
if [ "$BACKEND" = sqlite ]; then
	# Another process holds the file's write lock (WAL: readers go on) until it is ended.
	python3 -c '
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN EXCLUSIVE")
open(sys.argv[2], "w").close()
time.sleep(60)' "$WORK/cluster.db" "$WORK/locked" &
	LOCKER=$!
	for i in $(seq 100); do [ -e "$WORK/locked" ] && break; sleep 0.1; done
	[ -e "$WORK/locked" ] || fail "the test could not lock the SQLite store"
	no_db "locked"
	kill_ours "$LOCKER"
	wait "$LOCKER" 2>/dev/null
else
	ip -n "$HUB" link set "${VETH[pg]}" down
	no_db "cut off"
	ip -n "$HUB" link set "${VETH[pg]}" up
fi
# Reached again: creates through a work again.
t0=$(now_ms)
while :; do
	http a POST /v1/sandboxes '{"template":"tiny"}'
	[ "$HS" = 201 ] && break
	[ $(($(now_ms) - t0)) -lt 20000 ] ||
		fail "$STORE reachable again, creates through a still fail 20 s later: $HS $HB $(diag)"
	sleep 0.5
done
sid=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["id"])' "$HB")
echo "$sid $(owner_header)" >>"$WORK/created2"
ok "$STORE reachable again: a create through a works after $(($(now_ms) - t0)) ms"
if [ "$BACKEND" = postgresql ]; then
	pg pg_ctl -D "$PGDIR/data" -m fast -w stop >/dev/null || fail "pg_ctl stop"
	no_db stopped
fi

# --- the servers stop on SIGTERM; nothing is left behind -------------------------------------------------
for h in a b c; do
	stop_pid "${PID[$h]}" 30 || fail "the server of $h did not stop cleanly on SIGTERM within 30 s: $(tail -5 "$WORK/$h.err")"
	PID[$h]=
done
ok "the three servers stop on SIGTERM, exit 0"
if grep -E "AddressSanitizer|LeakSanitizer|runtime error" "$WORK"/*.err; then fail "sanitizer report in a server log"; fi
all_ids=$(cat "$WORK/created" "$WORK/created2" "$WORK/created.secret" | cut -d' ' -f1)
for h in a b c; do
	expect_rc 0 "$SPACE" rm --all --state "${ST[$h]}"
	"$SPACE" ls --json --state "${ST[$h]}" | grep -q '"id"' && fail "sandboxes left on $h after rm --all"
done
# shellcheck disable=SC2086
left=$(leaks_of $all_ids)
[ -z "$left" ] || fail "left on the host after rm: $left"
ok "every sandbox removed, nothing left on the host"
echo "serve-cluster ($BACKEND): $CHECKS checks passed"
echo "PASS"
