#!/usr/bin/env bash
# Self-test of apns_standin.py (the APNs stand-in) with openssl, curl --http2 and nghttp.
# Exit 0 when every check passes; prints one line per check. Env: PYTHON (default: the repo venv).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-$HERE/../../.venv/bin/python}
STANDIN="$HERE/apns_standin.py"
W=$(mktemp -d)
SERVER_PID=""
TEAM=DEF123GHIJ
KID=ABC123DEFG
TOPIC=com.example.app
TOK_A=aaaa0000aaaa0000aaaa0000aaaa0000aaaa0000aaaa0000aaaa0000aaaa0000
TOK_B=bbbb0000bbbb0000bbbb0000bbbb0000bbbb0000bbbb0000bbbb0000bbbb0000
TOK_C=cccc0000cccc0000cccc0000cccc0000cccc0000cccc0000cccc0000cccc0000

cleanup() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
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
# jsonq EXPR: evaluates a Python expression over d = JSON on stdin
jsonq() { "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }

# --- keys, certificate, tokens -----------------------------------------------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -keyout "$W/tls.key" -out "$W/tls.crt" -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$W/apns.p8" 2>/dev/null
openssl pkey -in "$W/apns.p8" -pubout -out "$W/apns.pub" 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$W/other.p8" 2>/dev/null
ok "openssl: self-signed P-256 TLS cert for 127.0.0.1, APNs P-256 key pair, a second key"

{ read -r JWT; read -r JWT_EXPIRED; read -r JWT_OTHERKEY; read -r JWT_BADKID; read -r JWT_BADISS; } < <(
"$PY" - "$W/apns.p8" "$W/other.p8" "$KID" "$TEAM" <<'EOF'
import sys, time, jwt
key, other, kid, team = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3], sys.argv[4]
now = int(time.time())
mint = lambda k, kid_, iss, iat: jwt.encode({"iss": iss, "iat": iat}, k, algorithm="ES256", headers={"kid": kid_})
print(mint(key, kid, team, now))
print(mint(key, kid, team, now - 4000))
print(mint(other, kid, team, now))
print(mint(key, "ZZZ999ZZZZ", team, now))
print(mint(key, kid, "ZZZ999ZZZZ", now))
EOF
)
ok "PyJWT: minted valid, expired (iat-4000 s), other-key, wrong-kid and wrong-iss ES256 tokens"

# --- start ---------------------------------------------------------------------------------------
start_standin() {
    "$PY" "$STANDIN" --cert "$W/tls.crt" --key "$W/tls.key" --jwt-public-key "$W/apns.pub" \
        --team-id "$TEAM" --key-id "$KID" --topics "$TOPIC,com.example.other" "$@" >"$W/out" 2>"$W/err" &
    SERVER_PID=$!
    for _ in $(seq 100); do
        [ -s "$W/out" ] && break
        kill -0 "$SERVER_PID" 2>/dev/null || fail "stand-in exited early"
        sleep 0.1
    done
    LINE=$(cat "$W/out")
    [[ "$LINE" =~ ^apns-standin:\ listening\ on\ 127\.0\.0\.1:([0-9]+)\ control\ 127\.0\.0\.1:([0-9]+)$ ]] \
        || fail "ready line: '$LINE'"
    PORT=${BASH_REMATCH[1]}
    CPORT=${BASH_REMATCH[2]}
}
start_standin
ok "ready line: $LINE"
URL="https://127.0.0.1:$PORT"
C="http://127.0.0.1:$CPORT"

ctl() { curl -sS -X "$1" "$C$2" ${3:+--data-binary "$3"}; }
ctl_status() { curl -sS -o /dev/null -w '%{http_code}' -X "$1" "$C$2" ${3:+--data-binary "$3"}; }
script() { [ "$(ctl POST /script "$1" | jsonq 'd["rules"]')" -ge 0 ] || fail "POST /script"; }
printf '{"aps":{"alert":"hi","mutable-content":1}}' > "$W/payload"

# [PUSH_TOPIC=… PUSH_TYPE=… PUSH_PRIO=… PUSH_BODY=file] push TOKEN JWT|- [extra curl args] -> "<status> <http_version>"; headers in $W/hdr, body in $W/body
push() {
    local tok=$1 j=$2; shift 2
    local auth=()
    [ "$j" != "-" ] && auth=(-H "authorization: bearer $j")
    [ -n "${PUSH_TOPIC-$TOPIC}" ] && auth+=(-H "apns-topic: ${PUSH_TOPIC-$TOPIC}")
    auth+=(-H "apns-push-type: ${PUSH_TYPE-alert}" -H "apns-priority: ${PUSH_PRIO-10}")
    curl -sS --http2 --cacert "$W/tls.crt" -o "$W/body" -D "$W/hdr" -w '%{http_code} %{http_version}' \
        -X POST "${auth[@]}" \
        --data-binary @"${PUSH_BODY-$W/payload}" "$@" "$URL/3/device/$tok"
}
reason() { jsonq 'd["reason"]' < "$W/body"; }
hdr() { grep -i "^$1:" "$W/hdr" | head -1 | cut -d' ' -f2- | tr -d '\r'; }

# --- basic APNs behaviour ------------------------------------------------------------------------
expect "200 over HTTP/2" "$(push $TOK_A "$JWT")" "200 2"
[[ "$(hdr apns-id)" =~ ^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$ ]] || fail "apns-id '$(hdr apns-id)'"
[ ! -s "$W/body" ] || fail "200 body not empty"
ok "200 has a fresh uppercase apns-id and an empty body"
push $TOK_A "$JWT" -H 'apns-id: 123e4567-e89b-12d3-a456-426614174000' >/dev/null
expect "request apns-id echoed" "$(hdr apns-id)" "123e4567-e89b-12d3-a456-426614174000"
expect "no authorization -> 403" "$(push $TOK_A - | cut -d' ' -f1) $(reason)" "403 MissingProviderToken"
expect "JWT signed by another key -> 403" "$(push $TOK_A "$JWT_OTHERKEY" | cut -d' ' -f1) $(reason)" "403 InvalidProviderToken"
expect "JWT with wrong kid -> 403" "$(push $TOK_A "$JWT_BADKID" | cut -d' ' -f1) $(reason)" "403 InvalidProviderToken"
expect "JWT with wrong iss -> 403" "$(push $TOK_A "$JWT_BADISS" | cut -d' ' -f1) $(reason)" "403 InvalidProviderToken"
expect "garbage JWT -> 403" "$(push $TOK_A "not.a.jwt" | cut -d' ' -f1) $(reason)" "403 InvalidProviderToken"
expect "JWT iat 4000 s old -> 403" "$(push $TOK_A "$JWT_EXPIRED" | cut -d' ' -f1) $(reason)" "403 ExpiredProviderToken"
expect "failure has content-type json" "$(hdr content-type)" "application/json"

expect "GET -> 405" "$(push $TOK_A "$JWT" -X GET | cut -d' ' -f1) $(reason)" "405 MethodNotAllowed"
expect "no token -> 400" "$(push "" "$JWT" | cut -d' ' -f1) $(reason)" "400 MissingDeviceToken"
expect "non-hex token -> 404" "$(push "xyz" "$JWT" | cut -d' ' -f1) $(reason)" "404 BadPath"
expect "missing topic -> 400" "$(PUSH_TOPIC= push $TOK_A "$JWT" | cut -d' ' -f1) $(reason)" "400 MissingTopic"
expect "unlisted topic -> 400" "$(PUSH_TOPIC=com.evil push $TOK_A "$JWT" | cut -d' ' -f1) $(reason)" "400 TopicDisallowed"
expect "bad push type -> 400" "$(PUSH_TYPE=shout push $TOK_A "$JWT" | cut -d' ' -f1) $(reason)" "400 InvalidPushType"
expect "bad priority -> 400" "$(PUSH_PRIO=7 push $TOK_A "$JWT" | cut -d' ' -f1) $(reason)" "400 BadPriority"
expect "65-byte collapse id -> 400" "$(push $TOK_A "$JWT" -H "apns-collapse-id: $(printf 'x%.0s' $(seq 65))" | cut -d' ' -f1) $(reason)" "400 BadCollapseId"
expect "repeated header -> 400" "$(push $TOK_A "$JWT" -H 'x-dup: 1' -H 'x-dup: 2' | cut -d' ' -f1) $(reason)" "400 DuplicateHeaders"
: > "$W/empty"
expect "empty body -> 400" "$(PUSH_BODY=$W/empty push $TOK_A "$JWT" | cut -d' ' -f1) $(reason)" "400 PayloadEmpty"
"$PY" -c 'import json; print(json.dumps({"aps": {}, "pad": "p" * 4980}), end="")' > "$W/big"
expect "5 KiB body -> 413" "$(PUSH_BODY=$W/big push $TOK_A "$JWT" | cut -d' ' -f1) $(reason)" "413 PayloadTooLarge"
head -c 200000 /dev/zero | tr '\0' 'x' > "$W/huge"
expect "200 KB body (beyond the 64 KiB flow-control windows) -> 413" \
    "$(PUSH_BODY=$W/huge push $TOK_A "$JWT" | cut -d' ' -f1) $(reason)" "413 PayloadTooLarge"
expect "5 KiB voip body -> 200" "$(PUSH_TYPE=voip PUSH_BODY=$W/big push $TOK_A "$JWT" | cut -d' ' -f1)" "200"

REC=$(ctl GET /requests)
expect "every request recorded" "$(jsonq 'len(d)' <<<"$REC")" "21"
expect "record fields" "$(jsonq '(d[0]["method"], d[0]["token"], d[0]["status"], d[0]["jwt"] is not None, d[0]["jwt_claims"]["iss"], d[0]["payload"]["aps"]["mutable-content"], [h for h in d[0]["headers"] if h[0]==":path"])' <<<"$REC")" \
    "('POST', '$TOK_A', 200, True, '$TEAM', 1, [[':path', '/3/device/$TOK_A']])"
expect "refused request recorded with its reason" "$(jsonq '(d[2]["status"], d[2]["reason"], d[2]["jwt"])' <<<"$REC")" "(403, 'MissingProviderToken', None)"

# --- script ---------------------------------------------------------------------------------------
script "[{\"token\":\"$TOK_B\",\"status\":400,\"reason\":\"BadDeviceToken\",\"times\":1},
         {\"token\":\"${TOK_C^^}\",\"status\":410,\"reason\":\"Unregistered\",\"timestamp\":1700000000000}]"
expect "scripted 400 BadDeviceToken" "$(push $TOK_B "$JWT" | cut -d' ' -f1) $(reason)" "400 BadDeviceToken"
expect "times:1 used up -> 200" "$(push $TOK_B "$JWT" | cut -d' ' -f1)" "200"
expect "scripted 410 (rule token matched case-insensitively)" "$(push $TOK_C "$JWT" | cut -d' ' -f1)" "410"
expect "410 body" "$(cat "$W/body")" '{"reason":"Unregistered","timestamp":1700000000000}'
expect "other tokens unaffected" "$(push $TOK_A "$JWT" | cut -d' ' -f1)" "200"
expect "GET /script shows uses" "$(ctl GET /script | jsonq '[r["used"] for r in d]')" "[1, 1]"

script '[{"token":"*","delay_ms":700,"times":1}]'
T=$(push $TOK_A "$JWT" -w '%{time_total}')
"$PY" -c "import sys; sys.exit(0 if $T >= 0.7 else 1)" || fail "delay_ms: answered after $T s"
ok "delay_ms 700 -> answered after $T s"

# --- concurrency over one connection --------------------------------------------------------------
ctl DELETE /requests >/dev/null
script '[{"token":"*","delay_ms":500}]'
BEFORE=$(ctl GET /stats | jsonq 'd["connections_opened"]')
URIS=(); for i in $(seq 10); do URIS+=("$URL/3/device/$(printf '%064x' "$i")"); done
START=$(date +%s.%N)
nghttp -n -d "$W/payload" -H "authorization: bearer $JWT" -H "apns-topic: $TOPIC" "${URIS[@]}" \
    || fail "nghttp exited $?"
ELAPSED=$("$PY" -c "import time; print(round(time.time() - $START, 2))")
"$PY" -c "import sys; sys.exit(0 if $ELAPSED < 3.0 else 1)" || fail "10 x 500 ms took $ELAPSED s: not concurrent"
STATS=$(ctl GET /stats)
expect "nghttp: 10 concurrent streams in $ELAPSED s on one connection" \
    "$(jsonq 'd["connections_opened"] - '"$BEFORE"', d["requests"], d["distinct_jwts"]' <<<"$STATS")" "(1, 10, 1)"
expect "nghttp: all answered 200 on one connection" \
    "$(ctl GET /requests | jsonq 'sorted({(r["connection"], r["status"]) for r in d}).__len__(), len({r["stream"] for r in d})')" "(1, 10)"

ctl DELETE /requests >/dev/null
BEFORE=$(ctl GET /stats | jsonq 'd["connections_opened"]')
PURLS=(); for i in $(seq 11 20); do PURLS+=("$URL/3/device/$(printf '%064x' "$i")"); done
curl -sS --http2 --parallel --parallel-max 10 --cacert "$W/tls.crt" -o /dev/null -X POST \
    -H "authorization: bearer $JWT" -H "apns-topic: $TOPIC" --data-binary @"$W/payload" "${PURLS[@]}" \
    2>"$W/curl.err" || { cat "$W/curl.err" >&2; fail "curl --parallel"; }
expect "curl --parallel: 10 requests multiplexed on one connection" \
    "$(ctl GET /stats | jsonq 'd["connections_opened"] - '"$BEFORE"', d["requests"]')" "(1, 10)"
ctl DELETE /script >/dev/null

# --- connection-level actions ----------------------------------------------------------------------
ctl DELETE /requests >/dev/null
script '[{"token":"*","action":"goaway","reason":"Shutdown","times":1}]'
GA=$(push $TOK_A "$JWT" 2>&1 | tr '\n' ' ' || true)
REC=$(ctl GET /requests)
expect "goaway recorded (curl said: $GA)" "$(jsonq '(d[0]["action"], d[0]["status"])' <<<"$REC")" "('goaway', None)"
expect "stand-in up after goaway, next push 200" "$(push $TOK_A "$JWT" | cut -d' ' -f1)" "200"
ctl DELETE /requests >/dev/null
script "[{\"token\":\"$TOK_A\",\"delay_ms\":300},{\"token\":\"$TOK_B\",\"action\":\"goaway\",\"reason\":\"Shutdown\"}]"
nghttp -v -d "$W/payload" -H "authorization: bearer $JWT" -H "apns-topic: $TOPIC" \
    "$URL/3/device/$TOK_A" "$URL/3/device/$TOK_B" > "$W/nghttp.log" 2>&1 || true
SID=$(ctl GET /requests | jsonq '[r["stream"] for r in d if r["action"] == "goaway"][0]')
expect "goaway on stream $SID: GOAWAY(last_stream_id=$((SID - 2)), NO_ERROR, debug reason), the lower stream still answered" \
    "$(grep -A1 'recv (stream_id=[0-9]*) :status\|recv GOAWAY' "$W/nghttp.log" \
       | grep -o 'stream_id=[0-9]*) :status: [0-9]*\|last_stream_id=.*' | tr '\n' ' ')" \
    "last_stream_id=$((SID - 2)), error_code=NO_ERROR(0x00), opaque_data(21)=[{\"reason\":\"Shutdown\"}]) stream_id=$((SID - 2))) :status: 200 "
expect "nghttp: request above last_stream_id reported not processed" \
    "$(grep -c 'Some requests were not processed. total=2, processed=1' "$W/nghttp.log")" "1"

ctl DELETE /requests >/dev/null
script "[{\"token\":\"$TOK_A\",\"delay_ms\":300},{\"token\":\"$TOK_B\",\"action\":\"goaway_after\"}]"
nghttp -v -d "$W/payload" -H "authorization: bearer $JWT" -H "apns-topic: $TOPIC" \
    "$URL/3/device/$TOK_A" "$URL/3/device/$TOK_B" > "$W/nghttp.log" 2>&1 || fail "nghttp: $(tail -3 "$W/nghttp.log")"
SID=$(ctl GET /requests | jsonq '[r["stream"] for r in d if r["action"] == "goaway_after"][0]')
expect "goaway_after on stream $SID: 200, GOAWAY(last_stream_id=$SID, NO_ERROR), then the delayed lower stream's 200" \
    "$(grep -A1 'recv (stream_id=[0-9]*) :status\|recv GOAWAY' "$W/nghttp.log" \
       | grep -o 'stream_id=[0-9]*) :status: [0-9]*\|last_stream_id=[0-9]*, error_code=[A-Z_]*' | tr '\n' ' ')" \
    "stream_id=$SID) :status: 200 last_stream_id=$SID, error_code=NO_ERROR stream_id=$((SID - 2))) :status: 200 "
ctl DELETE /requests >/dev/null
script '[{"token":"*","action":"goaway_after","times":1}]'
OUT=$(curl -sS --http2 --cacert "$W/tls.crt" -o /dev/null -w '%{http_code} ' -X POST -H "authorization: bearer $JWT" \
    -H "apns-topic: $TOPIC" --data-binary @"$W/payload" "$URL/3/device/$TOK_A" "$URL/3/device/$TOK_B" 2>&1 | tr '\n' ' ' || true)
expect "goaway_after: no later request answered on that connection (curl 2 URLs: $OUT)" \
    "$(ctl GET /requests | jsonq 'd[0]["action"], [r["connection"] for r in d[1:] if r["status"] is not None and r["connection"] == d[0]["connection"]]')" \
    "('goaway_after', [])"

ctl DELETE /requests >/dev/null
script '[{"token":"*","action":"reset","times":1}]'
RS=$(push $TOK_A "$JWT" 2>&1 | tr '\n' ' ' || true)
expect "reset recorded (curl said: $RS)" "$(ctl GET /requests | jsonq 'd[0]["action"]')" "reset"

ctl DELETE /requests >/dev/null
script '[{"token":"*","action":"close","times":1}]'
CL=$(push $TOK_A "$JWT" 2>&1 | tr '\n' ' ' || true)
expect "close recorded (curl said: $CL)" "$(ctl GET /requests | jsonq 'd[0]["action"]')" "close"

script '[{"token":"*","action":"hang","times":1}]'
set +e; push $TOK_A "$JWT" --max-time 1 >/dev/null 2>&1; RC=$?; set -e
expect "hang: curl --max-time 1 times out (exit 28)" "$RC" "28"
expect "stand-in still answers" "$(push $TOK_A "$JWT" | cut -d' ' -f1)" "200"

# --- refusal of non-h2 clients, control API errors, shutdown ---------------------------------------
set +e; curl -sS --http1.1 --cacert "$W/tls.crt" -o /dev/null -X POST "$URL/3/device/$TOK_A" 2>/dev/null; RC=$?; set -e
[ "$RC" -ne 0 ] || fail "HTTP/1.1 client was served"
expect "HTTP/1.1-only client refused (curl exit $RC), counted" "$(ctl GET /stats | jsonq 'd["connections_refused"]')" "1"
expect "bad script -> 400" "$(ctl_status POST /script '[{"token":"*","action":"explode"}]')" "400"
expect "unknown rule key -> 400" "$(ctl_status POST /script '[{"token":"*","stauts":500}]')" "400"
expect "non-array script -> 400" "$(ctl_status POST /script '{}')" "400"
expect "POST /shutdown" "$(ctl POST /shutdown)" '{"shutdown": true}'
set +e; wait "$SERVER_PID"; RC=$?; set -e; SERVER_PID=""
expect "exit status after /shutdown" "$RC" "0"

start_standin --initial-max-concurrent-streams 1 --max-concurrent-streams 5
nghttp -v -d "$W/payload" -H "authorization: bearer $JWT" -H "apns-topic: $TOPIC" \
    "https://127.0.0.1:$PORT/3/device/$TOK_A" > "$W/nghttp.log" 2>&1 || fail "nghttp: $(tail -3 "$W/nghttp.log")"
expect "--initial-max-concurrent-streams 1: SETTINGS says 1, then 5 before the first 200" \
    "$(awk '/^\[/ {r = /recv SETTINGS/} r' "$W/nghttp.log" | grep -o 'MAX_CONCURRENT_STREAMS(0x03):[0-9]*' | tr '\n' ' ')" \
    "MAX_CONCURRENT_STREAMS(0x03):1 MAX_CONCURRENT_STREAMS(0x03):5 "
kill -TERM "$SERVER_PID"
set +e; wait "$SERVER_PID"; RC=$?; set -e; SERVER_PID=""
expect "exit status after SIGTERM" "$RC" "0"

echo "PASS: $CHECKS checks"
