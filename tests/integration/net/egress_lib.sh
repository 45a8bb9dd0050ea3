# Shared by tests/integration/net/egress.sh and bench/egress.sh. Source after tests/lib.sh.

# Skips unless this host can run jail sandboxes with a gateway; makes a state dir with the base template.
egress_setup() {
	need_root; need_btrfs; need_loop
	need_built "${SPACE_AGENT_PATH:-}" space-agent SPACE_AGENT_PATH
	export SPACE_GATEWAY_PATH=${SPACE_GATEWAY_PATH:-$SPACE_BUILD_DIR/src/net/space-gateway}
	need_built "$SPACE_GATEWAY_PATH" space-gateway SPACE_GATEWAY_PATH
	command -v openssl >/dev/null || skip "openssl missing"
	command -v python3 >/dev/null || skip "python3 missing"
	unshare --user --pid --mount --net --fork true 2>/dev/null || skip "cannot create namespaces here"
	make_state 4G
	export SPACE_STATE_DIR=$STATE SPACE_QUIET_JAIL=1
	if ! SPACE="$SPACE" "$SPACE_SOURCE_DIR/scripts/make-templates.sh" base >"$STATE/make-templates.log" 2>&1; then
		grep -qiE 'could not resolve|failed to fetch|unable to connect|network is unreachable' \
			"$STATE/make-templates.log" && skip "Debian's archive is not reachable to build the base template"
		cat "$STATE/make-templates.log" >&2
		fail "building the base template failed"
	fi
}

# egress_upstreams DIR NAME...: a test CA (DIR/ca.pem), a server certificate for the names, and the HTTP
# and HTTPS upstreams on loopback (killed at exit), logging requests to DIR/requests.log. Sets HP and SP.
egress_upstreams() {
	local dir=$1 san
	shift
	mkdir -p "$dir"
	san=$(printf 'DNS:%s,' "$@")
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=egress-test-ca \
		-keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null || fail "test CA"
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" -keyout "$dir/srv.key" \
		-out "$dir/srv.csr" 2>/dev/null || fail "server key"
	printf 'subjectAltName=%s\n' "${san%,}" >"$dir/ext"
	openssl x509 -req -in "$dir/srv.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -days 2 \
		-extfile "$dir/ext" -out "$dir/srv.pem" 2>/dev/null || fail "server certificate"
	: >"$dir/requests.log"
	coproc UP { exec python3 "$SPACE_SOURCE_DIR/tests/integration/net/upstream.py" "$dir/requests.log" \
		"$dir/srv.pem" "$dir/srv.key"; }
	on_exit "kill_ours $UP_PID"
	read -r -t 10 HP SP <&"${UP[0]}" || fail "upstream servers did not start"
}
