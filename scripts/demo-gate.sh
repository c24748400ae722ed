#!/usr/bin/env bash
# The gate in front of a demo site, in one command (README, "The gate"; docs/gate.md):
#
#   scripts/demo-gate.sh [CAPACITY]
#
# Starts a small origin (python3's http.server on a demo shop), `anteroom serve --memory-only
# --public-url /anteroom` with a room "shop" of CAPACITY (default 2), and Debian's nginx with
# examples/nginx/gate.conf in front of both, then prints the site's address: open it in a few
# browser windows (private windows count as other people). Loopback only; Ctrl-C stops every
# process it started (by PID). Installs and builds what is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
CAPACITY="${1:-2}"
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target anteroom
BIN="$ROOT/build/release/anteroom"

DIR="$(mktemp -d /tmp/anteroom-demo-gate.XXXXXX)"
chmod 755 "$DIR"  # nginx's workers may run as another user
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

LISTEN_PORT="${DEMO_PORT:-$(free_port)}"
SITE="http://127.0.0.1:$LISTEN_PORT"
# The site: a shop that knows nothing of anteroom.
mkdir -p "$DIR/www/product" "$DIR/www/static" "$DIR/logs"
for page in index product/42 product/7; do
  cat >"$DIR/www/$page.html" <<HTML
<!doctype html><meta charset=utf-8><title>Demo shop</title>
<link rel=stylesheet href=/static/shop.css>
<h1>Demo shop: /$page</h1>
<p>You are in. <a href=/product/42.html?x=1>Product 42</a> · <a href=/product/7.html>Product 7</a>
<p><a href="/anteroom/v1/gate/shop/leave?return=$SITE/index.html">Leave the shop</a> (frees your place at once)
HTML
done
echo 'body { font: 18px system-ui; margin: 3rem; }' >"$DIR/www/static/shop.css"
chmod -R a+rX "$DIR/www"
ORIGIN_PORT=$(free_port)
python3 -m http.server "$ORIGIN_PORT" --bind 127.0.0.1 --directory "$DIR/www" >"$DIR/logs/origin.log" 2>&1 &
PIDS+=("$!")

ANTEROOM_PORT=$(free_port)
ANTEROOM_TOKEN_SECRET="demo-gate-$$" "$BIN" serve --listen "127.0.0.1:$ANTEROOM_PORT" \
  --memory-only --public-url /anteroom --log-level warn >"$DIR/logs/anteroom.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$ANTEROOM_PORT/healthz" >/dev/null && break; sleep 0.1; done
curl -sf -XPUT "http://127.0.0.1:$ANTEROOM_PORT/v1/rooms/shop" -H 'Content-Type: application/json' \
  -d "{\"capacity\":$CAPACITY,\"grace_ms\":5000,\"idle_timeout_ms\":60000,
       \"gate\":{\"bypass\":{\"paths\":[\"/static/\"]}}}" >/dev/null

sed -e "s|{{LISTEN_PORT}}|$LISTEN_PORT|g" -e "s|{{ORIGIN_PORT}}|$ORIGIN_PORT|g" \
  -e "s|{{ANTEROOM_PORT}}|$ANTEROOM_PORT|g" -e "s|{{ROOM}}|shop|g" \
  examples/nginx/gate.conf >"$DIR/gate.conf"
cat >"$DIR/nginx.conf" <<CONF
worker_processes 1;
pid $DIR/nginx.pid;
error_log $DIR/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $DIR/body;
  proxy_temp_path $DIR/proxy;
  fastcgi_temp_path $DIR/fastcgi;
  uwsgi_temp_path $DIR/uwsgi;
  scgi_temp_path $DIR/scgi;
  include $DIR/gate.conf;
}
CONF
nginx -c "$DIR/nginx.conf" -p "$DIR" -g 'daemon off;' >"$DIR/logs/nginx.log" 2>&1 &
PIDS+=("$!")
# Ready when a bypassed asset comes through (a page would take a slot).
for _ in $(seq 50); do curl -sf -o /dev/null "$SITE/static/shop.css" && break; sleep 0.1; done

cat <<EOT
Demo shop behind the gate: http://127.0.0.1:$LISTEN_PORT/index.html  (room "shop", capacity $CAPACITY)
Open it in $((CAPACITY + 1)) private windows: $CAPACITY go straight in, the next waits at position 1
and is let in (to the very page it asked for) when one of the others follows "Leave the shop".
The room:      curl -s http://127.0.0.1:$ANTEROOM_PORT/v1/rooms/shop
Ctrl-C stops the shop, nginx and anteroom.
EOT
wait "${PIDS[@]}"
