#!/usr/bin/env bash
# Self-test of cloudflare_standin.py (the Cloudflare TURN API stand-in) with curl and openssl.
# Exit 0 when every check passes; prints one line per check. Env: PYTHON (default: the repo venv).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-$HERE/../../.venv/bin/python}
STANDIN="$HERE/cloudflare_standin.py"
W=$(mktemp -d)
SERVER_PID=""
TOKEN=test-turn-api-token-0123456789
KID=0123456789abcdef0123456789abcdef
export PYTHONDONTWRITEBYTECODE=1

cleanup() {
    stop_standin
    rm -rf "$W"
}
trap cleanup EXIT

CHECKS=0
fail() { echo "FAIL: $*" >&2; [ -s "$W/err" ] && { echo "--- stand-in stderr:" >&2; tail -20 "$W/err" >&2; }; exit 1; }
ok() { CHECKS=$((CHECKS + 1)); echo "ok   $*"; }
expect() { # expect WHAT GOT WANT
    [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
    ok "$1"
}
# jsonq EXPR FILE: evaluates a Python expression over d = the JSON in FILE
jsonq() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[2])); print(eval(sys.argv[1]))' "$1" "$2"; }
# lastrec EXPR: a Python expression over r = the last line of the record file
lastrec() { "$PY" -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[2])][-1]; print(eval(sys.argv[1]))' "$1" "$W/record.jsonl"; }

stop_standin() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    SERVER_PID=""
}

start_standin() { # start_standin MODE [extra args]
    stop_standin
    local mode=$1; shift
    rm -f "$W/out" "$W/record.jsonl" "$W/ca.pem"
    "$PY" "$STANDIN" --token "$TOKEN" --key-id "$KID" --mode "$mode" --ca-out "$W/ca.pem" \
        --record "$W/record.jsonl" "$@" >"$W/out" 2>"$W/err" &
    SERVER_PID=$!
    for _ in $(seq 100); do
        [ -s "$W/out" ] && break
        kill -0 "$SERVER_PID" 2>/dev/null || fail "stand-in exited early"
        sleep 0.1
    done
    LINE=$(cat "$W/out")
    [[ "$LINE" =~ ^listening\ on\ ([0-9]+)$ ]] || fail "ready line: '$LINE'"
    PORT=${BASH_REMATCH[1]}
    URL="https://127.0.0.1:$PORT/v1/turn/keys/$KID/credentials/generate-ice-servers"
}

# post [curl args...]: POSTs {"ttl": 3600} to $URL; the body goes to $W/body, prints the status
post() {
    curl -sS --cacert "$W/ca.pem" -o "$W/body" -w '%{http_code}' -X POST \
        -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' --data '{"ttl": 3600}' "$@"
}

# --- ok: TLS, the example body, the record ------------------------------------------------------
start_standin ok
ok "ready line: $LINE"
openssl x509 -in "$W/ca.pem" -noout -text | grep -q "CA:TRUE" || fail "CA file is not a CA"
ok "--ca-out is a CA certificate"
expect "ok: status" "$(post "$URL")" 201
expect "ok: two entries" "$(jsonq 'len(d["iceServers"])' "$W/body")" 2
expect "ok: STUN urls" "$(jsonq 'd["iceServers"][0]["urls"]' "$W/body")" "['stun:stun.cloudflare.com:3478', 'stun:stun.cloudflare.com:53']"
expect "ok: STUN entry has no credentials" "$(jsonq 'sorted(d["iceServers"][0])' "$W/body")" "['urls']"
expect "ok: 6 TURN urls in the §8.3 order" "$(jsonq '",".join(d["iceServers"][1]["urls"])' "$W/body")" \
    "turn:turn.cloudflare.com:3478?transport=udp,turn:turn.cloudflare.com:53?transport=udp,turn:turn.cloudflare.com:3478?transport=tcp,turn:turn.cloudflare.com:80?transport=tcp,turns:turn.cloudflare.com:5349?transport=tcp,turns:turn.cloudflare.com:443?transport=tcp"
USER1=$(jsonq 'd["iceServers"][1]["username"]' "$W/body")
CRED1=$(jsonq 'd["iceServers"][1]["credential"]' "$W/body")
[ -n "$USER1" ] && [ -n "$CRED1" ] || fail "empty username/credential"
ok "ok: TURN entry carries username and credential"
expect "record: method" "$(lastrec 'r["method"]')" POST
expect "record: path" "$(lastrec 'r["path"]')" "/v1/turn/keys/$KID/credentials/generate-ice-servers"
expect "record: Authorization header" "$(lastrec '[v for k, v in r["headers"] if k.lower() == "authorization"]')" "['Bearer $TOKEN']"
expect "record: body" "$(lastrec 'r["body"]')" '{"ttl": 3600}'
expect "record: authorized, status" "$(lastrec '(r["authorized"], r["status"])')" "(True, 201)"
expect "record: answered credentials" "$(lastrec '(r["answered"]["username"], r["answered"]["credential"])')" "('$USER1', '$CRED1')"
post "$URL" >/dev/null
[ "$(jsonq 'd["iceServers"][1]["username"]' "$W/body")" != "$USER1" ] || fail "credentials repeat"
ok "ok: fresh credentials per request"
expect "localhost name verifies" "$(post "https://localhost:$PORT/v1/turn/keys/$KID/credentials/generate-ice-servers")" 201
if curl -sS -o /dev/null -X POST "$URL" 2>/dev/null; then fail "TLS verified without the CA"; fi
ok "TLS: refused without --cacert (curl verification fails)"

# --- refusals -------------------------------------------------------------------------------------
expect "wrong token -> 401" "$(post "$URL" -H 'Authorization: Bearer wrong')" 401
expect "record: unauthorized" "$(lastrec '(r["authorized"], r["status"], r["answered"])')" "(False, 401, None)"
expect "no Authorization -> 401" "$(curl -sS --cacert "$W/ca.pem" -o /dev/null -w '%{http_code}' -X POST --data '{"ttl": 3600}' "$URL")" 401
expect "wrong key id -> 404" "$(post "https://127.0.0.1:$PORT/v1/turn/keys/other/credentials/generate-ice-servers")" 404
expect "older /generate path -> 404" "$(post "https://127.0.0.1:$PORT/v1/turn/keys/$KID/credentials/generate")" 404
expect "GET -> 405" "$(curl -sS --cacert "$W/ca.pem" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$URL")" 405
expect "every request recorded (8; the untrusted TLS one never arrives)" "$(wc -l < "$W/record.jsonl")" 8

# --- ok-200, single-object, foreign-hosts, no-turn --------------------------------------------------
start_standin ok-200
expect "ok-200: status" "$(post "$URL")" 200
expect "ok-200: same body shape" "$(jsonq 'len(d["iceServers"][1]["urls"])' "$W/body")" 6

start_standin single-object
expect "single-object: status" "$(post "$URL")" 201
expect "single-object: iceServers is an object" "$(jsonq 'type(d["iceServers"]).__name__' "$W/body")" dict
expect "single-object: 7 urls with credentials" "$(jsonq '(len(d["iceServers"]["urls"]), bool(d["iceServers"]["username"]), bool(d["iceServers"]["credential"]))' "$W/body")" "(7, True, True)"

start_standin foreign-hosts
expect "foreign-hosts: status" "$(post "$URL")" 201
FILTER='[[u for u in e["urls"] if u.split(":")[0] in ("stun","turn","turns") and u.split(":")[1].split("?")[0] in ("stun.cloudflare.com","turn.cloudflare.com")] for e in d["iceServers"]]'
expect "foreign-hosts: after §8.3 filtering equals ok" "$(jsonq "[x for x in $FILTER if x]" "$W/body")" \
    "[['stun:stun.cloudflare.com:3478', 'stun:stun.cloudflare.com:53'], ['turn:turn.cloudflare.com:3478?transport=udp', 'turn:turn.cloudflare.com:53?transport=udp', 'turn:turn.cloudflare.com:3478?transport=tcp', 'turn:turn.cloudflare.com:80?transport=tcp', 'turns:turn.cloudflare.com:5349?transport=tcp', 'turns:turn.cloudflare.com:443?transport=tcp']]"
expect "foreign-hosts: has foreign URLs to drop" "$(jsonq 'sum(len(e["urls"]) for e in d["iceServers"])' "$W/body")" 18

start_standin no-turn
expect "no-turn: status" "$(post "$URL")" 201
expect "no-turn: no cloudflare turn URL" "$(jsonq 'any(u.startswith(("turn:turn.cloudflare.com", "turns:turn.cloudflare.com")) for e in d["iceServers"] for u in e["urls"])' "$W/body")" False

# --- slow, redirect, oversize, error, bad-json ---------------------------------------------------------
start_standin slow --delay 2
START=$(date +%s.%N)
expect "slow: status" "$(post "$URL")" 201
ELAPSED=$("$PY" -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]) >= 1.9)" "$START" "$(date +%s.%N)")
expect "slow: answered after --delay" "$ELAPSED" True
if post "$URL" --max-time 1 >/dev/null 2>&1; then fail "slow: answered within 1 s"; fi
ok "slow: a 1 s client timeout expires"
expect "slow: recorded before answering" "$(wc -l < "$W/record.jsonl")" 2

start_standin redirect
expect "redirect: 302" "$(post "$URL")" 302
LOCATION=$(curl -sS --cacert "$W/ca.pem" -o /dev/null -w '%{redirect_url}' -X POST -H "Authorization: Bearer $TOKEN" --data '{"ttl": 3600}' "$URL")
expect "redirect: Location" "$LOCATION" "$URL?redirected=1"
expect "redirect: target answers like ok" "$(post "$LOCATION")" 201
expect "redirect: following is visible in the record" "$(lastrec 'r["path"].endswith("?redirected=1")')" True

start_standin oversize
expect "oversize: status" "$(post "$URL")" 201
expect "oversize: 70,000 bytes" "$(wc -c < "$W/body")" 70000
expect "oversize: still valid JSON" "$(jsonq 'len(d["iceServers"])' "$W/body")" 2

start_standin error
expect "error: 500" "$(post "$URL")" 500

start_standin bad-json
expect "bad-json: status" "$(post "$URL")" 201
if "$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$W/body" 2>/dev/null; then fail "bad-json: body parses"; fi
ok "bad-json: body is not JSON"

# --- plain HTTP and SIGTERM -----------------------------------------------------------------------------
start_standin ok --plain-http
expect "plain-http: status" "$(curl -sS -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" --data '{"ttl": 3600}' "http://127.0.0.1:$PORT/v1/turn/keys/$KID/credentials/generate-ice-servers")" 201
kill "$SERVER_PID"
set +e; wait "$SERVER_PID"; RC=$?; set -e
SERVER_PID=""
expect "SIGTERM: exit status" "$RC" 0

echo "cloudflare_standin selftest: $CHECKS checks passed"
