/**
 * Redis from Debian's `redis-server` (7), the server the tests share: on
 * 127.0.0.1:6379 and [::1]:6379, without persistence (the fault suite starts
 * servers of its own with AOF when it needs them).
 */
import { join } from 'node:path';
import type { Broker, BrokerStatus } from './broker.js';
import { brokersDir, debVersion, listening, livePid, run, spawnDetached, stopPid, upstreamVersion, waitFor } from './system.js';

const PORT = 6379;
const EXPECTED_MAJOR = '7.';
const dir = () => brokersDir('run', 'redis');

async function answersPing(): Promise<boolean> {
  return run('redis-cli', ['-h', '127.0.0.1', '-p', String(PORT), 'ping'], { timeoutMs: 5_000 }).then(
    (out) => out.trim() === 'PONG',
    () => false,
  );
}

export const redis: Broker = {
  name: 'redis',
  ports: { client: PORT },
  debianPackages: ['redis-server', 'redis-tools'],
  get logFile() {
    return join(dir(), 'redis.log');
  },

  async install() {
    const version = await debVersion('redis-server');
    if (version === null) throw new Error('redis-server is not installed');
    if (!upstreamVersion(version).startsWith(EXPECTED_MAJOR)) throw new Error(`redis-server ${version} installed; the tests expect ${EXPECTED_MAJOR}x`);
  },

  async start(say) {
    if (await answersPing()) return;
    say('starting Redis on 127.0.0.1:6379');
    const args = ['--bind', '127.0.0.1', '-::1', '--port', String(PORT), '--save', '', '--appendonly', 'no', '--dir', dir(), '--daemonize', 'no'];
    spawnDetached('redis-server', args, { logFile: this.logFile, pidFile: join(dir(), 'pid') });
    await waitFor('Redis', 30_000, answersPing);
  },

  async stop(say) {
    if (livePid(join(dir(), 'pid')) === null) return;
    say('stopping Redis');
    await stopPid(join(dir(), 'pid'), [PORT]);
  },

  async status(): Promise<BrokerStatus> {
    const version = await debVersion('redis-server');
    return { up: await answersPing(), ports: this.ports, version: version && upstreamVersion(version), pid: livePid(join(dir(), 'pid')) ?? (await listening(PORT) ? await pidOfPort() : null) };
  },
};

/** The pid of a Redis server on 6379 this script did not start (from `INFO server`). */
async function pidOfPort(): Promise<number | null> {
  const info = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(PORT), 'info', 'server'], { timeoutMs: 5_000 }).catch(() => '');
  const match = /process_id:(\d+)/.exec(info);
  return match ? Number(match[1]) : null;
}
