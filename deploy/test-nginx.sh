#!/usr/bin/env bash
# Tests deploy/nginx.conf for real: two RAG replicas on one fresh PostgreSQL database, Debian's nginx
# on loopback in front of them (temporary prefix and config), then a build, appends, a streamed query
# and many queries through nginx, which must reach both replicas and get the same answers. Prints OK.
#
#   deploy/test-nginx.sh            (PostgreSQL at LECTERN_TEST_DATABASE_URL, else
#                                    postgres://postgres@127.0.0.1:5432/postgres)
#
# Installs nginx-light from Debian when no nginx is found (needs root and apt). Not part of npm test.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ADMIN_URL=${LECTERN_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}

log() { printf '== %s\n' "$*"; }
fail() {
  printf 'FAILED: %s\n' "$*" >&2
  exit 1
}

# --- nginx ---------------------------------------------------------------------------------------
NGINX=$(command -v nginx || true)
[ -z "$NGINX" ] && [ -x /usr/sbin/nginx ] && NGINX=/usr/sbin/nginx
if [ -z "$NGINX" ]; then
  log "installing nginx from Debian"
  [ "$(id -u)" = 0 ] || fail "nginx is missing and installing it needs root"
  # Keep the package from starting a system nginx on port 80 (policy-rc.d 101: "action forbidden").
  POLICY_ADDED=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    POLICY_ADDED=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends nginx-light ||
    { apt-get update && apt-get install -y --no-install-recommends nginx-light; } ||
    apt-get install -y --no-install-recommends nginx
  [ -n "$POLICY_ADDED" ] && rm -f /usr/sbin/policy-rc.d
  NGINX=$(command -v nginx || echo /usr/sbin/nginx)
fi
"$NGINX" -v

# --- state and cleanup ---------------------------------------------------------------------------
TMP=$(mktemp -d /tmp/lectern-nginx.XXXXXX)
DB="lectern_nginx_$$"
REPLICA_PIDS=()
NGINX_STARTED=""
cleanup() {
  local status=$?
  if [ -n "$NGINX_STARTED" ]; then
    "$NGINX" -p "$TMP/" -c "$TMP/nginx.conf" -e "$TMP/error.log" -s quit 2>/dev/null || true
  fi
  for pid in "${REPLICA_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${REPLICA_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  psql -q "$ADMIN_URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
  if [ "$status" != 0 ]; then
    for f in "$TMP"/replica-*.log "$TMP"/error.log; do
      [ -s "$f" ] && { echo "--- $f"; tail -n 30 "$f"; }
    done
  fi
  rm -rf "$TMP"
  exit "$status"
}
trap cleanup EXIT

free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

wait_for() { # url, what[, pid that must stay alive]
  for _ in $(seq 1 150); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    if [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null; then fail "$2 exited before answering $1"; fi
    sleep 0.2
  done
  fail "$2 did not answer $1"
}

# --- database and replicas -----------------------------------------------------------------------
log "database $DB"
pg_isready -q -d "$ADMIN_URL" || fail "PostgreSQL is not reachable at $ADMIN_URL"
psql -v ON_ERROR_STOP=1 -q "$ADMIN_URL" -c "CREATE DATABASE $DB"
DATABASE_URL="${ADMIN_URL%/*}/$DB"

PORT_A=$(free_port)
PORT_B=$(free_port)
while [ "$PORT_B" = "$PORT_A" ]; do PORT_B=$(free_port); done
PORT_NGINX=$(free_port)
for port in "$PORT_A" "$PORT_B"; do
  mkdir -p "$TMP/data-$port"
  HOST=127.0.0.1 RAG_PORT=$port DATABASE_URL=$DATABASE_URL DATA_DIR="$TMP/data-$port" LOG_LEVEL=warn \
    node --import tsx "$ROOT/src/cli/serve.ts" rag >"$TMP/replica-$port.log" 2>&1 &
  REPLICA_PIDS+=($!)
done
log "replicas on 127.0.0.1:$PORT_A and 127.0.0.1:$PORT_B"
wait_for "http://127.0.0.1:$PORT_A/health" "replica A" "${REPLICA_PIDS[0]}"
wait_for "http://127.0.0.1:$PORT_B/health" "replica B" "${REPLICA_PIDS[1]}"

# --- nginx on loopback with a temporary prefix ---------------------------------------------------
mkdir -p "$TMP/logs"
sed -e "s/127\.0\.0\.1:8101/127.0.0.1:$PORT_A/" \
  -e "s/127\.0\.0\.1:8102/127.0.0.1:$PORT_B/" \
  -e "s/listen 127\.0\.0\.1:8001;/listen 127.0.0.1:$PORT_NGINX;/" \
  deploy/nginx.conf >"$TMP/lectern-rag.conf"
grep -q "127.0.0.1:$PORT_A" "$TMP/lectern-rag.conf" || fail "could not point deploy/nginx.conf at the replicas"
USER_LINE=""
[ "$(id -u)" = 0 ] && USER_LINE="user root;"
cat >"$TMP/nginx.conf" <<EOF
$USER_LINE
worker_processes 1;
pid $TMP/nginx.pid;
error_log $TMP/error.log warn;
events { worker_connections 256; }
http {
  log_format upstreams '\$upstream_addr \$status \$request';
  access_log $TMP/access.log upstreams;
  client_body_temp_path $TMP/client_body;
  proxy_temp_path $TMP/proxy;
  fastcgi_temp_path $TMP/fastcgi;
  uwsgi_temp_path $TMP/uwsgi;
  scgi_temp_path $TMP/scgi;
  include $TMP/lectern-rag.conf;
}
EOF
"$NGINX" -t -p "$TMP/" -c "$TMP/nginx.conf" -e "$TMP/error.log" -q
"$NGINX" -p "$TMP/" -c "$TMP/nginx.conf" -e "$TMP/error.log"
NGINX_STARTED=1
NGINX_URL="http://127.0.0.1:$PORT_NGINX"
log "nginx on $NGINX_URL"
wait_for "$NGINX_URL/health" "nginx"

# --- through nginx -------------------------------------------------------------------------------
node --input-type=module - "$NGINX_URL" <<'EOF'
const base = process.argv[2];
const check = (ok, message) => {
  if (!ok) {
    console.error(`FAILED: ${message}`);
    process.exit(1);
  }
};
const post = async (path, body) => {
  const response = await fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
};
const words = "replica nginx upstream database cache version snapshot query index tenant".split(" ");
const documents = Array.from({ length: 200 }, (_, i) => ({
  id: `doc-${i}`,
  text: Array.from({ length: 120 }, (_, j) => words[(i * 7 + j * 3) % words.length]).join(" ") + ` marker${i}.`,
}));

const built = await post("/rag/build", { index_name: "nginx", documents });
check(built.status === 201, `build through nginx: ${built.status} ${JSON.stringify(built.body)}`);

// A body of ~12 MB: under client_max_body_size, so nginx must pass it on.
const big = "word ".repeat(2_400_000);
const large = await post("/rag/build", { index_name: "nginx-large", documents: [{ id: "big", text: big }] });
check(large.status === 201, `12 MB build through nginx: ${large.status}`);

const appends = await Promise.all(
  Array.from({ length: 10 }, (_, i) =>
    post("/rag/indices/nginx/documents", { documents: [{ id: `added-${i}`, text: `Added marker-added${i}.` }] }),
  ),
);
check(appends.every((r) => r.status === 200), `appends through nginx: ${appends.map((r) => r.status)}`);

let reference;
for (let i = 0; i < 60; i++) {
  const reply = await post("/rag/query", { index_name: "nginx", query: "replica cache snapshot", top_k: 10 });
  check(reply.status === 200, `query ${i}: ${reply.status}`);
  const { elapsed_ms: _elapsed, ...answer } = reply.body;
  if (reference === undefined) reference = JSON.stringify(answer);
  check(JSON.stringify(answer) === reference, `query ${i} answered differently`);
}
for (let i = 0; i < 10; i++) {
  const reply = await post("/rag/query", { index_name: "nginx", query: `marker-added${i}`, top_k: 1 });
  check(reply.body.results?.[0]?.document_id === `added-${i}`, `added-${i} not found: ${JSON.stringify(reply.body)}`);
}
const indices = await (await fetch(`${base}/rag/indices`)).json();
const nginxIndex = indices.indices.find((i) => i.name === "nginx");
check(nginxIndex?.documents_count === 210, `documents_count ${nginxIndex?.documents_count}, expected 210`);

// Server-sent events pass through (generative mode streams; with no GENERATION_URL the replica
// streams the extractive fallback).
const streamed = await fetch(`${base}/rag/query`, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ index_name: "nginx", query: "upstream database", answer: "generative", stream: true }),
});
check(streamed.status === 200, `streamed query: ${streamed.status}`);
check(
  (streamed.headers.get("content-type") ?? "").startsWith("text/event-stream"),
  `streamed content-type ${streamed.headers.get("content-type")}`,
);
const text = await streamed.text();
check(/event: results/.test(text) && /event: done/.test(text), `stream events: ${text.slice(0, 200)}`);
console.log("checks through nginx passed");
EOF

# Both replicas answered through nginx.
for port in "$PORT_A" "$PORT_B"; do
  served=$(grep -c "^127.0.0.1:$port 200 POST /rag/query" "$TMP/access.log" || true)
  log "replica :$port answered $served queries through nginx"
  [ "$served" -gt 0 ] || fail "replica :$port answered no query through nginx"
done
echo OK
