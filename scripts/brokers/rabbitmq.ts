/**
 * RabbitMQ from Debian's `rabbitmq-server` (3.10), the node the tests share:
 * AMQP on 127.0.0.1:5672, distribution on loopback too. It runs as Debian
 * runs it (the `rabbitmq` user, `/var/lib/rabbitmq`), so `rabbitmqctl`
 * reaches it; the fault suite's nodes are its own and never this one.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import type { Broker, BrokerStatus } from './broker.js';
import { debVersion, listening, run, upstreamVersion, waitFor } from './system.js';

const AMQP_PORT = 5672;
const EXPECTED_MAJOR_MINOR = '3.10.';
const CONFIG = '/etc/rabbitmq/conf.d/90-redeliver-loopback.conf';
const LOG = '/var/log/rabbitmq/startup_log';

/** The running node's OS pid, from `rabbitmqctl`, or null. */
async function nodePid(): Promise<number | null> {
  try {
    const out = await run('rabbitmqctl', ['eval', 'list_to_integer(os:getpid()).'], { timeoutMs: 15_000 });
    const pid = Number(out.trim());
    return Number.isInteger(pid) ? pid : null;
  } catch {
    return null;
  }
}

export const rabbitmq: Broker = {
  name: 'rabbitmq',
  ports: { amqp: AMQP_PORT },
  debianPackages: ['rabbitmq-server'],
  logFile: LOG,

  async install() {
    const version = await debVersion('rabbitmq-server');
    if (version === null) throw new Error('rabbitmq-server is not installed');
    if (!upstreamVersion(version).startsWith(EXPECTED_MAJOR_MINOR)) throw new Error(`rabbitmq-server ${version} installed; the tests expect ${EXPECTED_MAJOR_MINOR}x`);
    mkdirSync('/etc/rabbitmq/conf.d', { recursive: true });
    writeFileSync(CONFIG, '# written by `npm run brokers`: the shared test node listens on loopback only\nlisteners.tcp.default = 127.0.0.1:5672\ndistribution.listener.interface = 127.0.0.1\n');
  },

  async start(say) {
    if ((await listening(AMQP_PORT)) && (await nodePid()) !== null) return;
    say('starting RabbitMQ on 127.0.0.1:5672');
    await run('rabbitmq-server', ['-detached'], { timeoutMs: 60_000 });
    await waitFor('RabbitMQ', 120_000, () => listening(AMQP_PORT));
    // Listening is not booted: a node can accept connections and still be starting its queues.
    await run('rabbitmqctl', ['await_startup', '--timeout', '120'], { timeoutMs: 150_000 });
  },

  async stop(say) {
    if ((await nodePid()) === null && !(await listening(AMQP_PORT))) return;
    say('stopping RabbitMQ');
    await run('rabbitmqctl', ['stop'], { timeoutMs: 120_000 }).catch(() => undefined);
    await waitFor('RabbitMQ to close 5672', 60_000, async () => !(await listening(AMQP_PORT)));
  },

  async status(): Promise<BrokerStatus> {
    const version = await debVersion('rabbitmq-server');
    const pid = version === null ? null : await nodePid();
    return { up: pid !== null && (await listening(AMQP_PORT)), ports: this.ports, version: version && upstreamVersion(version), pid };
  },
};
