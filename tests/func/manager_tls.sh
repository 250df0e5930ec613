#!/usr/bin/env bash
# inca-manager's API over TLS and its refusals, on this machine's loopback
# (no testbed, no root): a lab CA from deploy/lab-ca, the manager serving
# HTTPS with tenant and admin tokens given as SHA-256 digests, and
#  - incactl, curl and libinca's client verifying the server against the CA,
#    and refusing it without the CA (curl: exit 60);
#  - a plain-HTTP client on the TLS port getting no answer (exit 52);
#  - a missing token, a wrong token, a truncated JSON body and a 10 MiB
#    body each refused with its status and a JSON error that says why;
#  - the secrets themselves in no file the manager reads.
# Usage: manager_tls.sh BUILD_DIR
set -u
BUILD=$(cd "$1" && pwd)
# shellcheck source=tests/func/lib.sh
. "$(dirname "$0")/lib.sh"

MGR=$BUILD/control/inca-manager
CTL=$BUILD/control/incactl
command -v openssl >/dev/null || { echo "SKIP: openssl missing (deploy/install-deps.sh)"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl missing (deploy/install-deps.sh)"; exit 77; }
WORK=$(mktemp -d /tmp/inca-tls.XXXXXX)
MGR_PID=
cleanup() {
	[ -n "$MGR_PID" ] && kill "$MGR_PID" 2>/dev/null && wait "$MGR_PID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

ADMIN=admin-secret-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
TENANT=tenant-secret-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
echo "sha256:$(sha "$ADMIN")" > "$WORK/admin.digest"
cat > "$WORK/topo.json" <<JSON
{ "switches": [ { "name": "tor", "role": "leaf", "ip": "10.0.0.254" } ],
  "hosts": [ { "name": "h1", "ip": "10.0.0.1", "leaf": "tor" },
             { "name": "h2", "ip": "10.0.0.2", "leaf": "tor" } ],
  "tenants": [ { "name": "a", "token": "sha256:$(sha "$TENANT")", "max_jobs": 4 } ] }
JSON
check "deploy/lab-ca makes a CA and a manager certificate" \
	quiet "$SRC/deploy/lab-ca" "$WORK/ca"
check "the certificate verifies against the CA" \
	quiet openssl verify -CAfile "$WORK/ca/ca.pem" "$WORK/ca/manager.pem"
check "no file the manager reads holds a secret" \
	test "$(grep -lr -e "$ADMIN" -e "$TENANT" "$WORK" | wc -l)" = 0

# a free port: the kernel's pick for a socket we close at once
PORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=https://127.0.0.1:$PORT
"$MGR" --topology "$WORK/topo.json" --token-file "$WORK/admin.digest" --db "$WORK/state.db" \
	--listen "127.0.0.1:$PORT" --tls-cert "$WORK/ca/manager.pem" \
	--tls-key "$WORK/ca/manager.key" > "$WORK/manager.log" 2>&1 &
MGR_PID=$!
for _ in $(seq 50); do
	grep -q "inca-manager: ready" "$WORK/manager.log" && break
	sleep 0.1
done
check "the manager serves https" grep -q "listening on 127.0.0.1:$PORT (https)" "$WORK/manager.log"

# req ARGS...: "STATUS BODY" of a curl request that trusts the lab CA
req() { curl -s --cacert "$WORK/ca/ca.pem" -w ' %{http_code}' "$@"; }
error_of() { /usr/bin/python3 -c 'import json, sys; print(json.loads(sys.stdin.read().rsplit(" ", 1)[0])["error"])'; }

expect_eq "GET /healthz over TLS" "$(req "$URL/healthz" | tr -d ' \n')" '{"status":"ok"}200'
expect_eq "the tenant's secret is accepted (its digest is what the topology holds)" \
	"$(req -H "Authorization: Bearer $TENANT" "$URL/v1/jobs" | tr -d ' \n')" '[]200'
out=$(curl -s "$URL/healthz"; echo "rc=$?")
expect_eq "curl without the lab CA refuses the server" "${out##*rc=}" 60
out=$(curl -s -m 5 "http://127.0.0.1:$PORT/healthz"; echo "rc=$?")
expect_eq "plain HTTP on the TLS port: no answer, the connection is closed" "$out" "rc=52"

out=$(req "$URL/v1/jobs")
expect_eq "no token: 401" "${out##* }" 401
expect_eq "... and why" "$(echo "$out" | error_of)" \
	"missing bearer token (Authorization: Bearer TOKEN)"
out=$(req -H "Authorization: Bearer ${TENANT}x" "$URL/v1/jobs")
expect_eq "a wrong token: 401" "${out##* }" 401
expect_eq "... and why" "$(echo "$out" | error_of)" "invalid token"
out=$(req -H "Authorization: Bearer sha256:$(sha "$TENANT")" "$URL/v1/jobs")
expect_eq "the digest itself is no token: 401" "${out##* }" 401
out=$(req -H "Authorization: Bearer $TENANT" -X POST -d '{"rank": 0, "si' "$URL/v1/jobs/j1/ranks")
expect_eq "a truncated body: 400" "${out##* }" 400
expect_eq "... and why" "$(echo "$out" | error_of)" \
	"body: line 1 column 15: premature end of input near '\"si'"
head -c 10485760 /dev/zero | tr '\0' ' ' > "$WORK/big.json"
out=$(req -H "Authorization: Bearer $TENANT" -X POST --data-binary "@$WORK/big.json" \
	"$URL/v1/jobs/j1/ranks")
expect_eq "a 10 MiB body: 413" "${out##* }" 413
expect_eq "... and why" "$(echo "$out" | error_of)" "body larger than 1 MiB"

echo "$ADMIN" > "$WORK/admin.token"
out=$("$CTL" --manager "$URL" --token-file "$WORK/admin.token" --cacert "$WORK/ca/ca.pem" \
	switches 2>&1)
check "incactl --cacert lists the switches over TLS" grep -q "^tor  *leaf  *10.0.0.254" <<< "$out"
out=$(INCA_MANAGER_CACERT="$WORK/ca/ca.pem" "$CTL" --manager "$URL" --token-file \
	"$WORK/admin.token" jobs 2>&1; echo "rc=$?")
expect_eq "incactl with INCA_MANAGER_CACERT" "${out##*rc=}" 0
out=$(INCA_MANAGER_CACERT= "$CTL" --manager "$URL" --token-file "$WORK/admin.token" \
	switches 2>&1; echo "rc=$?")
expect_eq "incactl without the CA: manager unreachable (exit 3)" "${out##*rc=}" 3
check "... saying why" grep -q "SSL certificate problem" <<< "$out"

# the manager refuses what it cannot use, before it listens
out=$("$MGR" --topology "$WORK/topo.json" --token-file "$WORK/admin.digest" --listen \
	127.0.0.1:1 --tls-cert "$WORK/ca/manager.pem" 2>&1; echo "rc=$?")
expect_eq "--tls-cert without --tls-key: usage error" "${out##*rc=}" 2
echo "sha256:0123456789abcdefzz" > "$WORK/bad.digest"
out=$("$MGR" --topology "$WORK/topo.json" --token-file "$WORK/bad.digest" --db "$WORK/x.db" \
	--listen 127.0.0.1:1 2>&1)
expect_eq "a malformed admin digest is refused" "$out" \
	"inca-manager: admin token: expected \"sha256:\" and 64 hex digits (the SHA-256 of the secret, e.g. from: printf %s SECRET | sha256sum)"
finish
