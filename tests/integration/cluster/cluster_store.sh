#!/bin/bash
# The cluster store's C test (test_cluster_store), the same checks against each back-end: SQLite in a file
# of a temporary directory, then a throwaway PostgreSQL on loopback (its own directory and port, stopped and
# removed at exit). Root (the server runs as the postgres user).
. "$(dirname "$0")/../../lib.sh"
need_root
TEST=${1:?the test binary}
WORK=$(mktemp -d /tmp/space-cluster-store-XXXXXX)
chmod 755 "$WORK"
on_exit "rm -rf '$WORK'"
# run_on BACKEND CONNINFO: the test on one back-end; it must end with its completion line, 0 failed.
run_on() {
	local t0 rc
	t0=$(date +%s%N)
	"$TEST" "$2" >"$WORK/out-$1" 2>&1
	rc=$?
	cat "$WORK/out-$1"
	[ $rc = 0 ] || fail "test_cluster_store failed on $1"
	grep -Eq "^cluster-store $1: [0-9]{2,} checks, 0 failed\$" "$WORK/out-$1" ||
		fail "cluster-store $1: no completion line with 0 failed"
	echo "$1: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
}
run_on sqlite "sqlite:$WORK/cluster.db"
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$PGBIN" ] && [ -x "$PGBIN/initdb" ] || skip "postgresql missing (scripts/deps.sh installs it); SQLite passed"
id postgres >/dev/null 2>&1 || skip "no postgres user (the postgresql package makes it); SQLite passed"
mkdir "$WORK/pg" && chown postgres "$WORK/pg"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
runuser -u postgres -- "$PGBIN/initdb" -D "$WORK/pg/data" -A trust -U postgres >"$WORK/initdb.log" 2>&1 ||
	fail "initdb: $(tail -3 "$WORK/initdb.log")"
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/pg/data" -l "$WORK/pg/log" -w \
	-o "-k $WORK/pg -h 127.0.0.1 -p $PORT -c fsync=off" start >/dev/null || fail "PostgreSQL did not start: $(tail -5 "$WORK/pg/log")"
on_exit "runuser -u postgres -- '$PGBIN/pg_ctl' -D '$WORK/pg/data' -m immediate stop >/dev/null"
run_on postgresql "host=127.0.0.1 port=$PORT user=postgres dbname=postgres"
echo PASS
