/**
 * A Redis primary with one replica, of the benchmark's own: two
 * `redis-server` processes on `port` and `port + 1` (never the shared
 * server), each in a fresh directory with `appendonly yes`, `appendfsync
 * everysec`, the replica following the primary. `stop()` kills both and
 * removes the directories.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

export class ReplicaPair {
  readonly #children: ChildProcess[] = [];

  private constructor(
    readonly port: number,
    readonly dir: string,
  ) {}

  /** Starts both servers; resolves once the replica is in sync. */
  static async start(port: number): Promise<ReplicaPair> {
    const pair = new ReplicaPair(port, mkdtempSync(join(tmpdir(), 'redeliver-bench-replicas-')));
    try {
      pair.#spawn(port, []);
      pair.#spawn(port + 1, ['--replicaof', '127.0.0.1', String(port)]);
      const admin = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => 100 });
      admin.on('error', () => undefined);
      try {
        const deadline = Date.now() + 30_000;
        for (;;) {
          const info = await admin.info('replication').catch(() => '');
          if (/^slave0:.*state=online/m.test(info)) break;
          if (Date.now() > deadline) throw new Error(`the replica on ${port + 1} did not come in sync with ${port} within 30 s`);
          await new Promise((r) => setTimeout(r, 100));
        }
      } finally {
        admin.disconnect();
      }
    } catch (error) {
      pair.stop();
      throw error;
    }
    return pair;
  }

  /** The primary's URL. */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Kills both servers and removes their directories. */
  stop(): void {
    for (const child of this.#children) child.kill('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
  }

  #spawn(port: number, extra: readonly string[]): void {
    const dir = mkdtempSync(join(this.dir, `${port}-`));
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'everysec', '--save', '', ...extra];
    const child = spawn('redis-server', args, { stdio: 'ignore' });
    child.on('error', () => undefined);
    this.#children.push(child);
  }
}
