#!/usr/bin/env bash
# Runs a throwaway redis-server on loopback for tests and CI: no
# persistence, output to a log file, in the background.
#
#   scripts/redis.sh start [PORT]   start on PORT (default: a free port); prints the port
#   scripts/redis.sh stop  [PORT]   stop the server started on PORT (default: every one started here)
#
# State (pid and log files) lives in ${DUALMAP_REDIS_DIR:-${TMPDIR:-/tmp}/dualmap-redis}.
# The Go tests of package state do not need this: they start their own
# servers (internal/state/redistest_test.go). Needs redis-server (Debian:
# apt-get install -y redis-server).
set -euo pipefail

dir="${DUALMAP_REDIS_DIR:-${TMPDIR:-/tmp}/dualmap-redis}"
bin="$(command -v redis-server || true)"

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

ping() {
	# PING over bash's /dev/tcp, so redis-cli is not needed.
	(
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf 'PING\r\n' >&3
		IFS= read -r -t 1 line <&3 || exit 1
		[[ "$line" == "+PONG"* ]]
	) 2>/dev/null
}

start() {
	[[ -n "$bin" ]] || { echo "redis.sh: redis-server not found (apt-get install -y redis-server)" >&2; exit 1; }
	local port="${1:-$(free_port)}"
	mkdir -p "$dir"
	"$bin" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
		--dir "$dir" >"$dir/redis-$port.log" 2>&1 &
	echo $! >"$dir/redis-$port.pid"
	for _ in $(seq 100); do
		if ping "$port"; then
			echo "$port"
			return 0
		fi
		kill -0 "$(cat "$dir/redis-$port.pid")" 2>/dev/null || break
		sleep 0.05
	done
	echo "redis.sh: redis-server on port $port did not answer PING; log:" >&2
	cat "$dir/redis-$port.log" >&2
	stop "$port"
	exit 1
}

stop() {
	local pidfile pid
	for pidfile in "$dir"/redis-${1:-*}.pid; do
		[[ -e "$pidfile" ]] || continue
		pid="$(cat "$pidfile")"
		if kill "$pid" 2>/dev/null; then
			for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		fi
		rm -f "$pidfile"
	done
}

case "${1:-}" in
start) shift; start "$@" ;;
stop) shift; stop "$@" ;;
*) echo "usage: $0 start [PORT] | stop [PORT]" >&2; exit 2 ;;
esac
