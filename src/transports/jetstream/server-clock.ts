/**
 * The server's clock, as seen from this process. Delayed retries are due at
 * a time the server stamped, so they are compared with the server's clock,
 * not this machine's: a probe stores a message in the clock stream and reads
 * back the time the server gave it; between probes, time runs on this
 * process's monotonic clock, which never jumps. The estimate errs late,
 * never early: while probes fail the last reading runs on with a growing
 * margin, and before the first reading there is no estimate at all.
 */
import type { JetStreamClients } from './connection.js';
import type { Topology } from './topology.js';
import type { Clock } from '../../time/clock.js';
import type { Logger } from '../../logger.js';

/** How often the server's clock is read again. */
export const CLOCK_PROBE_INTERVAL_MS = 60_000;

/**
 * How far the server's clock and this process's monotonic clock are taken
 * to drift apart, in ms per ms, once a reading is older than the probe
 * interval: 1 ms a second, above what NTP slews a clock by.
 */
export const STALE_READING_DRIFT = 0.001;

/** The server's clock has not been read yet (the server could not be reached): there is no estimate of it. */
export class ServerClockUnreadError extends Error {
  constructor() {
    super("jetstream: the server's clock has not been read yet");
    this.name = 'ServerClockUnreadError';
  }
}

export class ServerClock {
  #base: { serverMs: number; monotonic: number } | undefined;
  #probing: Promise<void> | undefined;
  #probedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly clients: () => Promise<JetStreamClients>,
    private readonly topology: () => Promise<Topology>,
    private readonly clock: Clock,
    private readonly logger: Logger | undefined,
  ) {}

  /**
   * The server's time now, in ms since the epoch, or a little earlier.
   * Reads the server's clock first when it was never read or was read more
   * than a minute ago. While it cannot be read, the last reading runs on,
   * less {@link STALE_READING_DRIFT} of the time past the probe interval;
   * this machine's wall clock is never used. Rejects with a
   * `ServerClockUnreadError` when the server's clock was never read.
   */
  async now(): Promise<number> {
    if (this.clock.monotonic() - this.#probedAt >= CLOCK_PROBE_INTERVAL_MS) await this.#probe();
    const base = this.#base;
    if (base === undefined) throw new ServerClockUnreadError();
    const elapsed = this.clock.monotonic() - base.monotonic;
    return base.serverMs + elapsed - Math.max(0, elapsed - CLOCK_PROBE_INTERVAL_MS) * STALE_READING_DRIFT;
  }

  #probe(): Promise<void> {
    this.#probing ??= this.#read().finally(() => {
      this.#probing = undefined;
    });
    return this.#probing;
  }

  async #read(): Promise<void> {
    try {
      const { js, jsm } = await this.clients();
      const topology = await this.topology();
      await topology.clockStream();
      const ack = await js.publish(topology.names.clockSubject, new Uint8Array(0));
      // The server stamped the probe before it acknowledged it: taking the stamp as the time of the
      // acknowledgement puts the estimate behind the server by at most one round trip, never ahead,
      // so a retry is never moved before it is due.
      const acknowledgedAt = this.clock.monotonic();
      const stored = await jsm.streams.getMessage(topology.names.clockStream, { seq: ack.seq });
      if (stored === null) throw new Error('the probe message was not found');
      this.#base = { serverMs: stored.time.getTime(), monotonic: acknowledgedAt };
      this.#probedAt = this.clock.monotonic();
    } catch (error) {
      this.#probedAt = this.clock.monotonic() - CLOCK_PROBE_INTERVAL_MS + 5_000;
      this.logger?.warn({ error: String(error) }, `jetstream: could not read the server's clock (${String(error)}); delayed retries are timed by its last reading, erring late, or wait until it is read`);
    }
  }
}
