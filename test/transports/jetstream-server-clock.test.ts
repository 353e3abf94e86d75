/**
 * The server's clock as the JetStream transport reads it, on a fake clock
 * and a stand-in for the server whose probes can be made to fail: while the
 * server cannot be read, the estimate errs late, never early by this
 * machine's clock.
 */
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/time/fake-clock.js';
import type { JetStreamClients } from '../../src/transports/jetstream/connection.js';
import { CLOCK_PROBE_INTERVAL_MS, ServerClock } from '../../src/transports/jetstream/server-clock.js';
import type { Topology } from '../../src/transports/jetstream/topology.js';
import { recordingLogger } from '../support/recording-logger.js';

/** A server whose clock reads `serverAhead` ms ahead of the fake clock's monotonic time (its own, whatever this machine's wall clock says), and whose probes fail while `down`. */
function fakeServer(clock: FakeClock, serverAhead: number) {
  const server = { down: false, probes: 0 };
  const clients = {
    js: {
      publish: async () => {
        server.probes += 1;
        if (server.down) throw new Error('connection closed');
        return { seq: server.probes };
      },
    },
    jsm: { streams: { getMessage: async () => ({ time: new Date(clock.monotonic() + serverAhead) }) } },
  } as unknown as JetStreamClients;
  const topology = { clockStream: async () => undefined, names: { clockSubject: 'clock', clockStream: 'CLOCK' } } as unknown as Topology;
  return { server, clients: async () => clients, topology: async () => topology };
}

describe("the JetStream transport's reading of the server's clock", () => {
  it('runs a reading forward on the monotonic clock while probes work', async () => {
    const clock = new FakeClock(1_000_000);
    const { clients, topology } = fakeServer(clock, 30_000);
    const serverClock = new ServerClock(clients, topology, clock, undefined);
    expect(await serverClock.now()).toBe(1_030_000);
    await clock.advance(10_000);
    clock.stepWall(3_600_000);
    expect(await serverClock.now()).toBe(1_040_000);
  });

  it('never read: rejects rather than answer with this machine\'s clock, and reads the server as soon as it answers', async () => {
    const clock = new FakeClock(1_000_000);
    const { server, clients, topology } = fakeServer(clock, -60_000);
    server.down = true;
    const logger = recordingLogger();
    const serverClock = new ServerClock(clients, topology, clock, logger);
    await expect(serverClock.now()).rejects.toThrow(/server's clock/);
    expect(logger.lines.some((l) => l.level === 'warn')).toBe(true);
    server.down = false;
    await clock.advance(5_000);
    expect(await serverClock.now()).toBe(1_005_000 - 60_000);
  });

  it('while probes fail, runs the last reading forward with a margin that grows with its age, never ahead of it', async () => {
    const clock = new FakeClock(1_000_000);
    const { server, clients, topology } = fakeServer(clock, -120_000);
    const serverClock = new ServerClock(clients, topology, clock, undefined);
    const read = await serverClock.now();
    server.down = true;
    clock.stepWall(3_600_000);
    let previousLag = 0;
    for (const minutes of [2, 10, 60]) {
      await clock.advance(minutes * 60_000 - (clock.monotonic() - 1_000_000));
      const elapsed = clock.monotonic() - 1_000_000;
      const lag = read + elapsed - (await serverClock.now());
      expect(lag).toBeGreaterThan(previousLag);
      expect(lag).toBe((elapsed - CLOCK_PROBE_INTERVAL_MS) / 1_000);
      previousLag = lag;
    }
    expect(server.probes).toBeGreaterThan(3);
    server.down = false;
    await clock.advance(60_000);
    expect(await serverClock.now()).toBe(clock.monotonic() - 120_000);
  });
});
