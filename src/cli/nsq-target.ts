/**
 * `nsq://` targets of the CLI and the dashboard:
 *
 * ```
 * nsq://host:4150                          one nsqd; its HTTP API on the next port (4151)
 * nsq://host:4150?http=4161                its HTTP API on another port of the same host
 * nsq://host:4150?http=other:4151          or on another host
 * nsq://host:4150?lookupd=host:4161        also every nsqd that nsqlookupd lists (repeat lookupd= for more)
 * nsq://?lookupd=host:4161                 only the nodes nsqlookupd lists
 * ```
 *
 * The port defaults to 4150. The transport's options come out; nothing is
 * connected here.
 */
import { UsageError } from './open-transport.js';

/** The NSQ transport options a target names. */
export interface NsqTarget {
  readonly nsqd: readonly string[];
  readonly lookupd: readonly string[];
  readonly httpAddresses: Readonly<Record<string, string>>;
}

const EXAMPLE = 'nsq://127.0.0.1:4150 (with ?http=<port or host:port> when nsqd\'s HTTP API is not on the next port, and ?lookupd=<host:port> to find nodes through nsqlookupd)';

/** Reads an `nsq://` target; a UsageError for anything it cannot read. */
export function parseNsqTarget(target: string): NsqTarget {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    throw new UsageError(`${target} is not an NSQ target such as ${EXAMPLE}`);
  }
  if (url.protocol !== 'nsq:') throw new UsageError(`${target} is not an NSQ target such as ${EXAMPLE}`);
  if (url.username !== '' || url.password !== '') throw new UsageError('an nsq:// target takes no user or password (nsqd has none over TCP without an auth server)');
  for (const name of url.searchParams.keys()) {
    if (name !== 'http' && name !== 'lookupd') throw new UsageError(`unknown option ${name} in the NSQ target; it takes http= and lookupd=`);
  }
  const lookupd = url.searchParams.getAll('lookupd').map((a) => checkAddress(a, 'lookupd'));
  if (url.hostname === '') {
    if (lookupd.length === 0) throw new UsageError(`an NSQ target needs an nsqd host or a lookupd= address, such as ${EXAMPLE}`);
    if (url.searchParams.has('http')) throw new UsageError('http= names the HTTP API of the nsqd of the target; give the nsqd too');
    return { nsqd: [], lookupd, httpAddresses: {} };
  }
  const tcp = `${url.hostname}:${url.port === '' ? 4150 : url.port}`;
  const http = url.searchParams.get('http');
  const httpAddresses: Record<string, string> = {};
  if (http !== null) httpAddresses[tcp] = /^\d+$/.test(http) ? `${url.hostname}:${checkPort(http)}` : checkAddress(http, 'http');
  return { nsqd: [tcp], lookupd, httpAddresses };
}

function checkAddress(address: string, what: string): string {
  const match = /^(\[[^\]]+\]|[^:/?#\s]+):(\d+)$/.exec(address);
  if (!match) throw new UsageError(`${what}=${address} is not a host:port address`);
  checkPort(match[2]!);
  return address;
}

function checkPort(port: string): string {
  const n = Number(port);
  if (!(Number.isInteger(n) && n >= 1 && n <= 65_535)) throw new UsageError(`${port} is not a port`);
  return port;
}
