/**
 * NSQ v1.3.0: nsqd and nsqlookupd built from the Go module proxy with
 * `CGO_ENABLED=0` (`go install` refuses the module because its `go.mod` has
 * a `replace` directive, so the apps are built inside the module cache's
 * copy). nsqlookupd on 127.0.0.1:4160 (TCP) and 4161 (HTTP); nsqd on
 * 4150 (TCP) and 4151 (HTTP), registered with that nsqlookupd, with a data
 * directory of its own. Readiness is each one's `GET /ping`.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Broker, BrokerStatus } from './broker.js';
import { brokersDir, goCommand, httpGet, livePid, run, spawnDetached, stopPid, waitFor } from './system.js';

const VERSION = '1.3.0';
const MODULE = `github.com/nsqio/nsq@v${VERSION}`;
const PORTS = { tcp: 4150, http: 4151, lookupdTcp: 4160, lookupdHttp: 4161 } as const;
const binDir = () => brokersDir('nsq', VERSION, 'bin');
const runDir = () => brokersDir('run', 'nsq');
const nsqd = () => join(binDir(), 'nsqd');
const nsqlookupd = () => join(binDir(), 'nsqlookupd');

async function pings(port: number): Promise<boolean> {
  const reply = await httpGet(port, '/ping');
  return reply?.status === 200 && reply.body.trim() === 'OK';
}

export const nsq: Broker = {
  name: 'nsq',
  ports: PORTS,
  get logFile() {
    return join(runDir(), 'nsqd.log');
  },

  async install(say) {
    if (existsSync(nsqd()) && existsSync(nsqlookupd())) return;
    const go = await goCommand('nsqd');
    const env = { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-modcacherw' };
    say(`building nsqd and nsqlookupd v${VERSION} from the Go module proxy`);
    const download = JSON.parse(await run(go, ['mod', 'download', '-json', MODULE], { env, cwd: binDir() })) as { Dir?: string; Error?: string };
    if (!download.Dir) throw new Error(`go mod download ${MODULE} failed: ${download.Error ?? 'no directory'}`);
    await run(go, ['build', '-o', `${binDir()}/`, './apps/nsqd', './apps/nsqlookupd'], { env, cwd: download.Dir, timeoutMs: 900_000 });
  },

  async start(say) {
    if ((await pings(PORTS.lookupdHttp)) && (await pings(PORTS.http))) return;
    const dir = runDir();
    if (!(await pings(PORTS.lookupdHttp))) {
      say('starting nsqlookupd on 127.0.0.1:4160/4161');
      const args = [`--tcp-address=127.0.0.1:${PORTS.lookupdTcp}`, `--http-address=127.0.0.1:${PORTS.lookupdHttp}`, '--broadcast-address=127.0.0.1'];
      spawnDetached(nsqlookupd(), args, { logFile: join(dir, 'nsqlookupd.log'), pidFile: join(dir, 'nsqlookupd.pid') });
      await waitFor('nsqlookupd', 30_000, () => pings(PORTS.lookupdHttp));
    }
    if (!(await pings(PORTS.http))) {
      say('starting nsqd on 127.0.0.1:4150/4151');
      const args = [
        `--tcp-address=127.0.0.1:${PORTS.tcp}`,
        `--http-address=127.0.0.1:${PORTS.http}`,
        '--broadcast-address=127.0.0.1',
        `--lookupd-tcp-address=127.0.0.1:${PORTS.lookupdTcp}`,
        `--data-path=${brokersDir('run', 'nsq', 'data')}`,
        // Every 100 ms nsqd's queue scan looks at this many channels for due deferred messages; with more channels than that, a delayed message waits for its channel's turn (docs/nsq.md).
        '--queue-scan-selection-count=1000',
      ];
      spawnDetached(nsqd(), args, { logFile: this.logFile, pidFile: join(dir, 'nsqd.pid') });
      await waitFor('nsqd', 30_000, () => pings(PORTS.http));
    }
  },

  async stop(say) {
    const dir = runDir();
    if (livePid(join(dir, 'nsqd.pid')) === null && livePid(join(dir, 'nsqlookupd.pid')) === null) return;
    say('stopping nsqd and nsqlookupd');
    await stopPid(join(dir, 'nsqd.pid'), [PORTS.tcp, PORTS.http]);
    await stopPid(join(dir, 'nsqlookupd.pid'), [PORTS.lookupdTcp, PORTS.lookupdHttp]);
  },

  async status(): Promise<BrokerStatus> {
    const version = existsSync(nsqd()) ? /v(\d+\.\d+\.\d+)/.exec(await run(nsqd(), ['--version']).catch(() => ''))?.[1] ?? null : null;
    const up = (await pings(PORTS.http)) && (await pings(PORTS.lookupdHttp));
    return { up, ports: this.ports, version, pid: livePid(join(runDir(), 'nsqd.pid')) };
  },
};
