/**
 * The transport conformance suite against a real RocketMQ 5 (name server,
 * broker, gRPC proxy), under a consumer group of its own; its topics and
 * group are deleted afterwards. The cut cases give the client a TCP proxy
 * as its endpoint; the client also connects straight to the address the
 * proxy's routes name (where it receives, acknowledges and sends), so a
 * cut closes the connections through the TCP proxy and aborts (`ss -K`)
 * every other connection to the proxy this process opened since the
 * cuttable transport was made: all of that transport's. The client's gRPC
 * channels reconnect at once, so a cut that ended there would fail only
 * the calls under way at that instant; the cut lasts {@link OUTAGE_MS}
 * instead, aborting each new connection as it opens, so the receives,
 * acknowledgements and sends of that span fail and the transport has to
 * recover from them.
 */
import { execFileSync } from 'node:child_process';
import { afterAll } from 'vitest';
import { TcpProxy } from '../support/tcp-proxy.js';
import { ROCKETMQ_ENDPOINTS, RocketScratch, rocketSkipReason } from '../transports/rocketmq/scratch.js';
import { describeTransportConformance } from './suite.js';

const skip = await rocketSkipReason();
const scratch = new RocketScratch('conf');
const proxyPort = Number(ROCKETMQ_ENDPOINTS.split(':')[1]);

/** How long a cut lasts, ms. */
const OUTAGE_MS = 3_000;

/** How often new connections are looked for during a cut, ms. */
const OUTAGE_POLL_MS = 50;

afterAll(async () => {
  if (!skip) await scratch.cleanup();
}, 120_000);

/** The local ports of this process's established connections to the gRPC proxy's port. */
function ownSockets(): Set<number> {
  const out = execFileSync('ss', ['-tnpH', 'state', 'established', `( dport = :${proxyPort} )`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  const ports = new Set<number>();
  for (const line of out.split('\n')) {
    const local = /^\s*\d+\s+\d+\s+\S+:(\d+)\s/.exec(line);
    if (local && line.includes(`pid=${process.pid},`)) ports.add(Number(local[1]));
  }
  return ports;
}

/** Aborts this process's connections to the gRPC proxy's port that `before` does not list; says how many. */
function abortSocketsSince(before: ReadonlySet<number>): number {
  let aborted = 0;
  for (const port of ownSockets()) {
    if (before.has(port)) continue;
    try {
      // A connection that closed since it was listed is no longer there to abort: nothing to report.
      execFileSync('ss', ['-K', `( sport = :${port} and dport = :${proxyPort} )`], { stdio: 'ignore' });
      aborted++;
    } catch {
      // ss failed (the socket went away meanwhile): that connection is cut already.
    }
  }
  return aborted;
}

describeTransportConformance({
  name: 'rocketmq',
  create: async () => scratch.transport({ connectionName: 'redeliver-conformance' }),
  createCuttable: async () => {
    const proxy = await TcpProxy.start(proxyPort);
    const before = ownSockets();
    const transport = scratch.transport({ endpoints: `127.0.0.1:${proxy.port}`, connectionName: 'redeliver-conformance-cut' });
    let outage: NodeJS.Timeout | undefined;
    const cut = () => {
      const cutAt = Date.now();
      clearInterval(outage);
      outage = setInterval(() => {
        proxy.cut();
        abortSocketsSince(before);
        if (Date.now() - cutAt >= OUTAGE_MS) clearInterval(outage);
      }, OUTAGE_POLL_MS);
      return proxy.cut() + abortSocketsSince(before);
    };
    // A lease is a receive's invisible duration on the broker: a cut connection does not end it.
    return { transport, cut, cutEndsLeases: false, dispose: () => (clearInterval(outage), proxy.close()) };
  },
  limitsWholeMessage: "the body and the properties are limited apart, and a copy's properties are cut to fit theirs",
  skip,
});
