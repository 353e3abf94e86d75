/**
 * NATS from Debian's `nats-server` (2.9) with JetStream, the server the
 * tests share: clients on 127.0.0.1:4222, monitoring on 127.0.0.1:8222
 * (its `/healthz` is the readiness probe), JetStream's files in the run
 * directory.
 *
 * Also {@link installPartitionServer}: a newer nats-server built from the
 * Go module proxy, for the fault suite's partition cluster alone.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Broker, BrokerStatus } from './broker.js';
import { brokersDir, debVersion, goCommand, httpGet, listening, livePid, run, spawnDetached, stopPid, upstreamVersion, waitFor } from './system.js';

const CLIENT_PORT = 4222;
const MONITOR_PORT = 8222;
const EXPECTED_MAJOR_MINOR = '2.9.';
const dir = () => brokersDir('run', 'nats');

/**
 * The nats-server the partition scenarios run: 2.9.10 (Debian's) gives one
 * stream sequence to two messages, and resets a stream's cluster state, in
 * some splits, losing publishes it confirmed (docs/fault-suite.md, "What
 * nats-server 2.9.10 loses in a split"); this one did not in the same rows.
 */
const PARTITION_SERVER_VERSION = '2.15.2';

/**
 * Builds nats-server {@link PARTITION_SERVER_VERSION} from the Go module
 * proxy with `CGO_ENABLED=0`, once per machine, and resolves its path.
 */
export async function installPartitionServer(say: (line: string) => void): Promise<string> {
  const bin = brokersDir('nats', PARTITION_SERVER_VERSION, 'bin');
  const server = join(bin, 'nats-server');
  if (existsSync(server)) return server;
  const go = await goCommand(`nats-server ${PARTITION_SERVER_VERSION}`);
  say(`building nats-server v${PARTITION_SERVER_VERSION} from the Go module proxy`);
  const env = { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-modcacherw', GOBIN: bin };
  await run(go, ['install', `github.com/nats-io/nats-server/v2@v${PARTITION_SERVER_VERSION}`], { env, cwd: bin, timeoutMs: 900_000 });
  return server;
}

async function healthy(): Promise<boolean> {
  const reply = await httpGet(MONITOR_PORT, '/healthz');
  return reply?.status === 200;
}

export const nats: Broker = {
  name: 'nats',
  ports: { client: CLIENT_PORT, monitor: MONITOR_PORT },
  debianPackages: ['nats-server'],
  get logFile() {
    return join(dir(), 'nats.log');
  },

  async install() {
    const version = await debVersion('nats-server');
    if (version === null) throw new Error('nats-server is not installed');
    if (!upstreamVersion(version).startsWith(EXPECTED_MAJOR_MINOR)) throw new Error(`nats-server ${version} installed; the tests expect ${EXPECTED_MAJOR_MINOR}x`);
  },

  async start(say) {
    if (await healthy()) return;
    if (await listening(CLIENT_PORT)) throw new Error(`something listens on ${CLIENT_PORT} without answering /healthz on ${MONITOR_PORT}: a NATS server not started by this script? Stop it first`);
    say('starting NATS with JetStream on 127.0.0.1:4222');
    const args = ['-a', '127.0.0.1', '-p', String(CLIENT_PORT), '-m', String(MONITOR_PORT), '-js', '-sd', join(dir(), 'jetstream'), '-l', this.logFile];
    spawnDetached('nats-server', args, { logFile: join(dir(), 'stdout.log'), pidFile: join(dir(), 'pid') });
    await waitFor('NATS', 30_000, healthy);
  },

  async stop(say) {
    if (livePid(join(dir(), 'pid')) === null) return;
    say('stopping NATS');
    await stopPid(join(dir(), 'pid'), [CLIENT_PORT, MONITOR_PORT]);
  },

  async status(): Promise<BrokerStatus> {
    const version = await debVersion('nats-server');
    return { up: await healthy(), ports: this.ports, version: version && upstreamVersion(version), pid: livePid(join(dir(), 'pid')) };
  },
};
