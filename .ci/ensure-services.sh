#!/usr/bin/env bash
# Starts the brokers the tests need when they are not already listening on loopback.
set -uo pipefail

listening() { (echo > "/dev/tcp/127.0.0.1/$1") >/dev/null 2>&1; }

wait_for() {
  local name=$1 port=$2 seconds=$3
  for _ in $(seq 1 "$seconds"); do
    listening "$port" && { echo "ci: $name is up on $port"; return 0; }
    sleep 1
  done
  echo "ci: $name did not come up on port $port" >&2
  return 1
}

if ! listening 5672; then
  echo "ci: starting RabbitMQ"
  rabbitmq-server -detached || true
  wait_for RabbitMQ 5672 90 || exit 1
else
  echo "ci: RabbitMQ is up on 5672"
fi
# A node can listen on 5672 and still never finish booting (seen after a node was killed with
# hundreds of quorum queues on disk): say so at once instead of letting every test time out.
if ! timeout 150 rabbitmqctl await_startup --timeout 120 >/dev/null 2>&1; then
  echo "ci: RabbitMQ listens on 5672 but has not finished booting within 120 s (rabbitmq-diagnostics check_running); its log is in /var/log/rabbitmq" >&2
  exit 1
fi

# Redis for the Redis transport's tests: the machine's server, without persistence (the fault suite starts its own).
if ! listening 6379; then
  echo "ci: starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
  wait_for Redis 6379 30 || exit 1
else
  echo "ci: Redis is up on 6379"
fi

# NATS with JetStream for the JetStream transport's tests: the machine's server (the fault suite starts its own).
if ! listening 4222; then
  echo "ci: starting NATS"
  mkdir -p /var/lib/nats-server
  # The pid file scopes the "already running" check to this server: without it any nats-server (a fault suite's own) counts.
  start-stop-daemon --start --oknodo --background --pidfile /run/nats-server-4222.pid --make-pidfile --exec /usr/sbin/nats-server -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log || true
  wait_for NATS 4222 30 || exit 1
else
  echo "ci: NATS is up on 4222"
fi

# The dashboard's browser test drives Debian's Chromium (a browser download cannot work here).
if ! command -v chromium >/dev/null 2>&1; then
  echo "ci: installing chromium"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null || { echo "ci: could not install chromium" >&2; exit 1; }
fi
