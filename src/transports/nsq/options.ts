import { connectionBackoff } from '../../backoff/connection.js';
import type { Backoff } from '../../backoff/types.js';
import type { Logger } from '../../logger.js';
import { systemClock, MAX_TIMER_MS, type Clock } from '../../time/clock.js';
import { systemRandom, type Random } from '../../time/random.js';
import { leaseOption, wholeNumberOption } from '../../transport/options.js';
import { checkName } from './names.js';

/** Options of an {@link NsqTransport}; every field is optional. */
export interface NsqTransportOptions {
  /** nsqd TCP addresses (`host:port`) to publish to and consume from. Default `['127.0.0.1:4150']` when `lookupd` is not given, else none. */
  readonly nsqd?: readonly string[];
  /**
   * nsqlookupd HTTP addresses (`host:port`): consumers also read from every
   * nsqd they list for the topic, looked up every `lookupdPollIntervalMs`,
   * and sends go to the nodes they list when `nsqd` is not given. Default none.
   */
  readonly lookupd?: readonly string[];
  /** How often consumers ask nsqlookupd for the nodes of their topic. Default 10 000 ms. */
  readonly lookupdPollIntervalMs?: number;
  /** The nsqd HTTP address of each TCP address. Default: the TCP port + 1 on the same host (nsqd's 4150/4151). */
  readonly httpAddresses?: Readonly<Record<string, string>>;
  /** The channel consumers read a queue's topic through. Default `'redeliver'`. */
  readonly channel?: string;
  /** The `client_id` and `hostname` every connection gives nsqd in IDENTIFY, shown in nsqd's `/stats`. Default `'redeliver'`. */
  readonly connectionName?: string;
  /**
   * The wait before each reconnection of a connection to nsqd (publishing and
   * consuming alike). Default `connectionBackoff()`: 1 s, then × 1.6 with
   * ± 20 % jitter, at most 120 s.
   */
  readonly connectionBackoff?: Backoff;
  /** The longest a publish waits for nsqd's answer before it fails (and its connection is dropped). Default 5 000 ms. */
  readonly publishTimeoutMs?: number;
  /** The heartbeat nsqd sends on an idle connection (IDENTIFY `heartbeat_interval`). Default 30 000 ms. */
  readonly heartbeatMs?: number;
  /**
   * How long a delivery stays leased before nsqd gives it to another
   * consumer (IDENTIFY `msg_timeout`), unless `consume` is given its own;
   * bounded by nsqd's `--max-msg-timeout`. Default 30 000 ms.
   */
  readonly leaseMs?: number;
  /**
   * How often each consuming connection sends nsqd a mark that bounds when
   * the deliveries after it were sent: a FIN of an id nsqd never gave out,
   * which nsqd answers with `E_FIN_FAILED` in order with the messages (and
   * logs as an error line). With it, a delivery's lease counts from the send
   * time of the last mark answered before the delivery arrived, not from
   * its arrival, so a delivery the network held back arrives with its lease
   * shortened by the delay, or over and dropped unhandled, instead of being
   * handled beside the copy nsqd gave out again when its lease ran out.
   * Each lease is then up to this interval (plus a round trip) shorter.
   * From 10 ms to half of `leaseMs`; 0 turns the marks off and leases
   * count from arrival. Default 0.
   */
  readonly leaseMarkMs?: number;
  /**
   * With more nsqd connections than a subscription's prefetch, each
   * connection gets RDY 1 in turn; an idle one passes it on after this long.
   * Default 5 000 ms.
   */
  readonly rdyRotateMs?: number;
  /** Source of time for leases, timers and backoffs. Default the system clock. */
  readonly clock?: Clock;
  /** Source of randomness for the reconnection jitter. Default `Math.random`. */
  readonly random?: Random;
  /** A pino-compatible logger for connection events and warnings. Default none: silent. */
  readonly logger?: Logger;
}

/** The defaults of {@link NsqTransportOptions}. */
export const NSQ_DEFAULTS = {
  nsqd: '127.0.0.1:4150',
  lookupdPollIntervalMs: 10_000,
  channel: 'redeliver',
  connectionName: 'redeliver',
  publishTimeoutMs: 5_000,
  heartbeatMs: 30_000,
  leaseMs: 30_000,
  leaseMarkMs: 0,
  rdyRotateMs: 5_000,
} as const;

/** Options with defaults applied and values checked. */
export interface ResolvedNsqOptions {
  readonly nsqd: readonly string[];
  readonly lookupd: readonly string[];
  readonly lookupdPollIntervalMs: number;
  readonly httpAddresses: Readonly<Record<string, string>>;
  readonly channel: string;
  readonly connectionName: string;
  readonly connectionBackoff: Backoff;
  readonly publishTimeoutMs: number;
  readonly heartbeatMs: number;
  readonly leaseMs: number;
  readonly leaseMarkMs: number;
  readonly rdyRotateMs: number;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger | undefined;
}

/** Applies the defaults and checks every value, throwing a RangeError or TypeError naming the option. */
export function resolveNsqOptions(options: NsqTransportOptions = {}): ResolvedNsqOptions {
  const lookupd = addresses('lookupd', options.lookupd ?? []);
  const nsqd = addresses('nsqd', options.nsqd ?? (lookupd.length === 0 ? [NSQ_DEFAULTS.nsqd] : []));
  if (nsqd.length === 0 && lookupd.length === 0) throw new RangeError('NsqTransport: give at least one nsqd or lookupd address');
  const backoff = options.connectionBackoff ?? connectionBackoff();
  if (typeof backoff !== 'function') throw new TypeError('NsqTransport: connectionBackoff must be a Backoff function');
  const connectionName = options.connectionName ?? NSQ_DEFAULTS.connectionName;
  if (typeof connectionName !== 'string' || connectionName.length === 0) throw new RangeError('NsqTransport: connectionName must be a non-empty string');
  const channel = options.channel ?? NSQ_DEFAULTS.channel;
  checkName(channel, 'channel', 'NsqTransport: channel');
  const leaseMs = leaseOption('NsqTransport', 'leaseMs', options.leaseMs, NSQ_DEFAULTS.leaseMs);
  const leaseMarkMs = options.leaseMarkMs === 0 || options.leaseMarkMs === undefined ? 0 : whole('leaseMarkMs (when not 0)', options.leaseMarkMs, 10, Math.max(10, Math.floor(leaseMs / 2)));
  return {
    nsqd,
    lookupd,
    lookupdPollIntervalMs: whole('lookupdPollIntervalMs', options.lookupdPollIntervalMs ?? NSQ_DEFAULTS.lookupdPollIntervalMs, 10, MAX_TIMER_MS),
    httpAddresses: { ...(options.httpAddresses ?? {}) },
    channel,
    connectionName,
    connectionBackoff: backoff,
    publishTimeoutMs: whole('publishTimeoutMs', options.publishTimeoutMs ?? NSQ_DEFAULTS.publishTimeoutMs, 1, MAX_TIMER_MS),
    heartbeatMs: whole('heartbeatMs', options.heartbeatMs ?? NSQ_DEFAULTS.heartbeatMs, 1_000, 60_000),
    leaseMs,
    leaseMarkMs,
    rdyRotateMs: whole('rdyRotateMs', options.rdyRotateMs ?? NSQ_DEFAULTS.rdyRotateMs, 1, MAX_TIMER_MS),
    clock: options.clock ?? systemClock,
    random: options.random ?? systemRandom,
    logger: options.logger,
  };
}

/** The HTTP address of nsqd `tcp`: as `httpAddresses` says, else the next port on the same host. */
export function httpAddressOf(tcp: string, httpAddresses: Readonly<Record<string, string>>): string {
  const given = httpAddresses[tcp];
  if (given !== undefined) return given;
  const { host, port } = splitAddress(tcp);
  return `${host.includes(':') ? `[${host}]` : host}:${port + 1}`;
}

/** `host:port` (or `[v6]:port`) split; throws a RangeError for anything else. */
export function splitAddress(address: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(address);
  const port = Number(match?.[3]);
  if (match === null || port < 1 || port > 65_535) throw new RangeError(`NsqTransport: ${JSON.stringify(address)} is not a host:port address`);
  return { host: match[1] ?? match[2]!, port };
}

function addresses(what: string, value: readonly string[]): string[] {
  if (!Array.isArray(value)) throw new TypeError(`NsqTransport: ${what} must be a list of host:port addresses`);
  for (const address of value) {
    if (typeof address !== 'string') throw new TypeError(`NsqTransport: ${what} must be a list of host:port addresses`);
    if (what === 'nsqd') splitAddress(address);
  }
  return [...new Set(value)];
}

function whole(what: string, value: unknown, min: number, max: number): number {
  return wholeNumberOption('NsqTransport', what, value, min, max);
}
