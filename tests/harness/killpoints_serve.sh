#!/bin/bash
# A killpoints worker command: worker $KILLPOINTS_SERVE_WORKER drives the lifecycle over HTTP against a
# `space serve` it starts (and starts again whenever the server is gone: the helper kills kill it
# mid-request), every other worker is WORKER (killpoints_worker).
# usage: killpoints_serve.sh WORKER
#   $SPACE_CLI, $SPACE_STATE_DIR, $SPACE_API_TEMPLATE; $KILLPOINTS_API_KEY: a key of that state directory;
#   $KILLPOINTS_SERVE_PID: the file the server's pid is written to (killpoints_check --victims reads it).
# Journal lines as killpoints_worker's: create, exec and destroy through POST /v1/sandboxes,
# POST /v1/sandboxes/ID/exec and DELETE /v1/sandboxes/ID, each "begin" before the request and "end" with
# rc=0 only on the answer the API documents (201, 200 with exit code 0, 204/200).
[ "${KILLPOINTS_WORKER:-}" = "${KILLPOINTS_SERVE_WORKER:-none}" ] || exec "$1"
who="$KILLPOINTS_WORKER.$KILLPOINTS_START"
journal() { echo "$who $*" >>"$KILLPOINTS_JOURNAL"; }
stop=0
trap 'stop=1' TERM
srv=0
port=
log=$(mktemp)
# The server dies with this worker (pdeathsig): a worker killed by the harness leaves no server behind.
start_serve() {
	: >"$log"
	setpriv --pdeathsig KILL "$SPACE_CLI" serve --listen 127.0.0.1:0 --state "$SPACE_STATE_DIR" >/dev/null 2>"$log" &
	srv=$!
	echo "$srv" >"$KILLPOINTS_SERVE_PID"
	port=
	for _ in $(seq 200); do
		port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$')
		[ -n "$port" ] && return 0
		sleep 0.05
	done
}
# Running, not a zombie left by a kill.
serve_alive() { [ "$srv" != 0 ] && [ -r "/proc/$srv/stat" ] && ! awk '{exit $3 != "Z"}' "/proc/$srv/stat"; }
api() { curl -sS -m 90 -o "$log.body" -w '%{http_code}' -H "X-API-Key: $KILLPOINTS_API_KEY" "$@" 2>/dev/null; }
while [ $stop = 0 ]; do
	if ! serve_alive; then
		[ "$srv" != 0 ] && wait "$srv" 2>/dev/null
		start_serve
	fi
	u="http://127.0.0.1:$port/v1/sandboxes"
	journal "create begin -"
	code=$(api -X POST "$u" -H 'Content-Type: application/json' \
		-d "{\"template\":\"$SPACE_API_TEMPLATE\",\"isolation\":\"jail\",\"network\":{}}")
	id=$(grep -o '"id":[[:space:]]*"sb-[a-z2-7]*"' "$log.body" 2>/dev/null | grep -o 'sb-[a-z2-7]*')
	if [ "$code" != 201 ] || [ -z "$id" ]; then
		journal "create end - rc=-$code"
		sleep 0.2
		continue
	fi
	journal "create end $id rc=0"
	journal "exec begin $id"
	code=$(api -X POST "$u/$id/exec" -H 'Content-Type: application/json' -d '{"argv":["echo","ok"]}')
	rc=-$code
	[ "$code" = 200 ] && grep -q '"exit_code":[[:space:]]*0' "$log.body" && rc=0
	journal "exec end $id rc=$rc"
	journal "destroy begin $id"
	code=$(api -X DELETE "$u/$id")
	rc=-$code
	case $code in 200 | 204) rc=0 ;; esac
	journal "destroy end $id rc=$rc"
done
serve_alive && kill "$srv" && wait "$srv"
rm -f "$log" "$log.body"
exit 0
