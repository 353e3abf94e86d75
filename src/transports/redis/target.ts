/**
 * A Redis Cluster target: `redis://` (or `rediss://`) followed by one or
 * more seed nodes separated by commas, which the cluster client asks for
 * the rest of the cluster:
 *
 * - `redis://10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000` (several seeds);
 * - `redis://10.0.0.1:7000?cluster=1` (one seed, named a cluster).
 *
 * User and password (`redis://user:password@host:port,host:port`) apply to
 * every node; `rediss://` connects to every node over TLS. A cluster has
 * only database 0, so the path is empty or `/0`.
 */
import { redactCredentials } from '../../util/redact.js';

/** A seed node of a cluster target. */
export interface ClusterSeed {
  readonly host: string;
  readonly port: number;
}

/** A cluster target, parsed. */
export interface ClusterTarget {
  readonly seeds: readonly ClusterSeed[];
  readonly username: string | undefined;
  readonly password: string | undefined;
  readonly tls: boolean;
}

/** The port of a seed that names none. */
const DEFAULT_PORT = 6379;

const URL_SHAPE = /^(rediss?):\/\/(?:([^@/?#]*)@)?([^/?#]+)(\/[^?#]*)?(?:\?([^#]*))?$/i;

/**
 * The cluster `url` names, or undefined when it names one server (one host,
 * without `?cluster=1`). Throws a RangeError for a cluster target it cannot
 * use.
 */
export function parseClusterTarget(url: string): ClusterTarget | undefined {
  const match = URL_SHAPE.exec(url);
  if (match === null) return undefined;
  const [, scheme = '', userinfo, hostList = '', path = '', query = ''] = match;
  const params = new URLSearchParams(query);
  const flag = params.get('cluster');
  const hosts = hostList.split(',');
  if (hosts.length === 1 && flag === null) return undefined;
  const what = `RedisTransport: cluster url ${JSON.stringify(redactCredentials(url))}`;
  if (flag !== null && flag !== '1' && flag !== 'true') throw new RangeError(`${what}: cluster must be 1 or true, got ${JSON.stringify(flag)}`);
  for (const name of params.keys()) if (name !== 'cluster') throw new RangeError(`${what}: unknown parameter ${JSON.stringify(name)} (a cluster target takes only cluster=1)`);
  if (path !== '' && path !== '/' && path !== '/0') throw new RangeError(`${what}: a cluster has only database 0, got path ${JSON.stringify(path)}`);
  const seeds = hosts.map((host) => seed(host, what));
  const [user = '', pass] = userinfo === undefined ? [] : splitOnce(userinfo, ':');
  return {
    seeds,
    username: user === '' ? undefined : decodeURIComponent(user),
    password: pass === undefined || pass === '' ? undefined : decodeURIComponent(pass),
    tls: scheme.toLowerCase() === 'rediss',
  };
}

function seed(text: string, what: string): ClusterSeed {
  const match = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d+))?$/i.exec(text.trim());
  if (match === null) throw new RangeError(`${what}: ${JSON.stringify(text)} is not a host or host:port`);
  const host = match[1]!.replace(/^\[(.*)\]$/, '$1');
  const port = match[2] === undefined ? DEFAULT_PORT : Number(match[2]);
  if (!Number.isInteger(port) || port < 1 || port > 65_535) throw new RangeError(`${what}: port ${match[2]} is not between 1 and 65535`);
  return { host, port };
}

function splitOnce(text: string, separator: string): [string, string | undefined] {
  const at = text.indexOf(separator);
  return at < 0 ? [text, undefined] : [text.slice(0, at), text.slice(at + 1)];
}
