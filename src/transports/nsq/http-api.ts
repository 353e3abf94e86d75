/**
 * Typed clients of nsqd's and nsqlookupd's HTTP APIs: what the NSQ protocol
 * cannot do (counting, creating and emptying topics and channels, reading a
 * node's configuration, discovery) goes through them.
 *
 * An address is `host:port` or an `http(s)://` URL. A URL may carry a user
 * and password (sent as basic authentication, for a proxy in front of the
 * node); they never appear in an error message or a log line, which name the
 * node by `host:port` alone.
 */

/** Default time for one HTTP request to a node, in milliseconds. */
export const DEFAULT_HTTP_TIMEOUT_MS = 5_000;

/** Options of an HTTP API client. */
export interface NsqHttpOptions {
  /** How long one request may take before it fails with `NsqHttpError` (`status` undefined). Default 5 000 ms. */
  timeoutMs?: number;
}

/**
 * A request to an nsqd or nsqlookupd HTTP API that failed: the node did not
 * answer in time, could not be reached, or answered with an error status.
 * `status` and `reason` (nsqd's `message`, e.g. `TOPIC_NOT_FOUND`) are set
 * when the node answered.
 */
export class NsqHttpError extends Error {
  override readonly name: string = 'NsqHttpError';
  constructor(
    /** The node, as `host:port` (never with credentials). */
    readonly address: string,
    /** The request, e.g. `POST /topic/create`. */
    readonly request: string,
    message: string,
    readonly status?: number,
    readonly reason?: string,
  ) {
    super(`nsq: ${request} on ${address} failed: ${message}`);
  }
}

/** A client of one node's HTTP API: the transport of requests, shared by nsqd's and nsqlookupd's. */
class HttpNode {
  /** The node as `host:port`, used in every message. */
  readonly address: string;
  private readonly base: string;
  private readonly authorization: string | undefined;
  private readonly timeoutMs: number;

  constructor(address: string, options: NsqHttpOptions = {}) {
    const url = new URL(/^https?:\/\//i.test(address) ? address : `http://${address}`);
    if (url.host === '') throw new Error(`nsq: an HTTP address needs a host and port, got ${JSON.stringify(url.host)}`);
    this.address = url.host;
    this.authorization =
      url.username === '' ? undefined : `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`;
    this.base = `${url.protocol}//${url.host}${url.pathname.replace(/\/+$/, '')}`;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_HTTP_TIMEOUT_MS;
    if (!(this.timeoutMs > 0)) throw new RangeError(`nsq: timeoutMs must be above 0, got ${this.timeoutMs}`);
  }

  /**
   * Sends one request and returns the answer's body. An answer whose status
   * is in `accept` is returned as `undefined` instead of failing (a delete of
   * what is gone already, a lookup of an unknown topic).
   */
  async request(method: 'GET' | 'POST', path: string, query: Record<string, string> = {}, body?: Uint8Array, accept: readonly number[] = []): Promise<string | undefined> {
    const search = new URLSearchParams(query).toString();
    const label = `${method} ${path}`;
    const headers: Record<string, string> = {};
    if (this.authorization !== undefined) headers['authorization'] = this.authorization;
    let response: Response;
    try {
      response = await fetch(`${this.base}${path}${search === '' ? '' : `?${search}`}`, {
        method,
        headers,
        ...(body === undefined ? {} : { body }),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (error) {
      const cause = error as Error;
      const why =
        cause.name === 'TimeoutError' ? `no answer within ${this.timeoutMs} ms` : `${cause.message}${describeCause((cause as { cause?: unknown }).cause)}`;
      throw new NsqHttpError(this.address, label, why);
    }
    const text = await response.text();
    if (response.ok) return text;
    const reason = reasonOf(text);
    if (accept.includes(response.status)) return undefined;
    throw new NsqHttpError(this.address, label, `HTTP ${response.status}${reason === undefined ? '' : ` ${reason}`}`, response.status, reason);
  }

  async json<T>(path: string, query: Record<string, string> = {}, accept: readonly number[] = []): Promise<T | undefined> {
    const text = await this.request('GET', path, query, undefined, accept);
    if (text === undefined) return undefined;
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new NsqHttpError(this.address, `GET ${path}`, `the answer is not JSON: ${text.slice(0, 80)}`);
    }
  }
}

function reasonOf(text: string): string | undefined {
  try {
    const parsed = JSON.parse(text) as { message?: unknown };
    if (typeof parsed.message === 'string') return parsed.message;
  } catch {
    // not JSON: use the text itself
  }
  const trimmed = text.trim();
  return trimmed === '' ? undefined : trimmed.slice(0, 200);
}

function describeCause(cause: unknown): string {
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    return ` (${typeof code === 'string' ? code : cause.message})`;
  }
  return '';
}

/** nsqd's `/info`. */
export interface NsqdInfo {
  version: string;
  broadcast_address: string;
  hostname: string;
  http_port: number;
  tcp_port: number;
  start_time: number;
}

/** One client connection of a channel, as `/stats` lists it. */
export interface NsqClientStats {
  client_id: string;
  hostname: string;
  remote_address: string;
  /** The RDY count the client last sent. */
  ready_count: number;
  in_flight_count: number;
  message_count: number;
  finish_count: number;
  requeue_count: number;
  connect_ts: number;
  user_agent?: string;
}

/**
 * A channel, as `/stats` reports it. A channel holds its own copy of every
 * message published to its topic after it was created.
 */
export interface NsqChannelStats {
  channel_name: string;
  /** Messages waiting to be sent to a consumer (memory and disk). */
  depth: number;
  /** The part of `depth` on disk. */
  backend_depth: number;
  /** Messages sent to a consumer and neither finished nor requeued yet. */
  in_flight_count: number;
  /** Messages requeued with a delay (REQ or DPUB) whose time has not come. */
  deferred_count: number;
  message_count: number;
  requeue_count: number;
  timeout_count: number;
  client_count: number;
  clients: NsqClientStats[];
  paused: boolean;
}

/** A topic, as `/stats` reports it. */
export interface NsqTopicStats {
  topic_name: string;
  channels: NsqChannelStats[];
  /** Messages in the topic itself: only while it has no channel (or all its channels are gone). */
  depth: number;
  backend_depth: number;
  message_count: number;
  message_bytes: number;
  paused: boolean;
}

/** nsqd's `/stats?format=json`. */
export interface NsqdStats {
  version: string;
  health: string;
  start_time: number;
  topics: NsqTopicStats[];
}

/** nsqd's durations in `/config` (Go durations, in nanoseconds). */
export type NsqdDurationOption = 'max_req_timeout' | 'msg_timeout' | 'max_msg_timeout' | 'sync_timeout' | 'heartbeat_interval' | 'max_heartbeat_interval';

/** nsqd's sizes and counts in `/config`. */
export type NsqdNumberOption = 'max_msg_size' | 'max_body_size' | 'max_rdy_count' | 'mem_queue_size' | 'sync_every' | 'max_output_buffer_size';

/** A client of one nsqd's HTTP API (default port 4151). */
export class NsqdHttpApi {
  private readonly node: HttpNode;

  constructor(address: string, options: NsqHttpOptions = {}) {
    this.node = new HttpNode(address, options);
  }

  /** The node as `host:port` (no credentials). */
  get address(): string {
    return this.node.address;
  }

  /** Resolves when nsqd answers `/ping` with OK (it answers 500 while its disk queue is unhealthy). */
  async ping(): Promise<void> {
    await this.node.request('GET', '/ping');
  }

  async info(): Promise<NsqdInfo> {
    return (await this.node.json<NsqdInfo>('/info')) as NsqdInfo;
  }

  /** `/stats`, narrowed to one topic (and one of its channels) when given; the per-client list is included. */
  async stats(filter: { topic?: string; channel?: string } = {}): Promise<NsqdStats> {
    const query: Record<string, string> = { format: 'json' };
    if (filter.topic !== undefined) query['topic'] = filter.topic;
    if (filter.channel !== undefined) query['channel'] = filter.channel;
    const stats = (await this.node.json<NsqdStats>('/stats', query)) as NsqdStats;
    return { ...stats, topics: (stats.topics ?? []).map((t) => ({ ...t, channels: (t.channels ?? []).map((c) => ({ ...c, clients: c.clients ?? [] })) })) };
  }

  /** One topic's stats, or `undefined` when nsqd has no such topic. */
  async topicStats(topic: string): Promise<NsqTopicStats | undefined> {
    const stats = await this.stats({ topic });
    return stats.topics.find((t) => t.topic_name === topic);
  }

  /** One channel's stats, or `undefined` when nsqd has no such topic or channel. */
  async channelStats(topic: string, channel: string): Promise<NsqChannelStats | undefined> {
    const stats = await this.stats({ topic, channel });
    return stats.topics.find((t) => t.topic_name === topic)?.channels.find((c) => c.channel_name === channel);
  }

  /** Creates a topic (nothing happens when it exists). */
  async createTopic(topic: string): Promise<void> {
    await this.node.request('POST', '/topic/create', { topic });
  }

  /** Deletes a topic with its channels and messages; `false` when there was no such topic. */
  async deleteTopic(topic: string): Promise<boolean> {
    return (await this.node.request('POST', '/topic/delete', { topic }, undefined, [404])) !== undefined;
  }

  /** Drops the messages held in the topic itself (not its channels'). */
  async emptyTopic(topic: string): Promise<void> {
    await this.node.request('POST', '/topic/empty', { topic });
  }

  async pauseTopic(topic: string): Promise<void> {
    await this.node.request('POST', '/topic/pause', { topic });
  }

  async unpauseTopic(topic: string): Promise<void> {
    await this.node.request('POST', '/topic/unpause', { topic });
  }

  /**
   * Creates a channel, and its topic first (nsqd refuses a channel of a topic
   * it does not have); from then on the channel keeps a copy of every message
   * published to the topic.
   */
  async createChannel(topic: string, channel: string): Promise<void> {
    await this.createTopic(topic);
    await this.node.request('POST', '/channel/create', { topic, channel });
  }

  /** Deletes a channel with its messages; `false` when there was no such topic or channel. */
  async deleteChannel(topic: string, channel: string): Promise<boolean> {
    return (await this.node.request('POST', '/channel/delete', { topic, channel }, undefined, [404])) !== undefined;
  }

  /** Drops the channel's waiting messages (not the ones in flight or deferred). */
  async emptyChannel(topic: string, channel: string): Promise<void> {
    await this.node.request('POST', '/channel/empty', { topic, channel });
  }

  async pauseChannel(topic: string, channel: string): Promise<void> {
    await this.node.request('POST', '/channel/pause', { topic, channel });
  }

  async unpauseChannel(topic: string, channel: string): Promise<void> {
    await this.node.request('POST', '/channel/unpause', { topic, channel });
  }

  /**
   * Publishes one message over HTTP (`POST /pub`), after a delay when
   * `deferMs` is given. Resolves once nsqd has taken it.
   */
  async publish(topic: string, body: Uint8Array, options: { deferMs?: number } = {}): Promise<void> {
    const query: Record<string, string> = { topic };
    if (options.deferMs !== undefined) query['defer'] = String(Math.max(0, Math.round(options.deferMs)));
    await this.node.request('POST', '/pub', query, body);
  }

  /** One of nsqd's options as `GET /config/<option>` returns it (JSON). */
  async config(option: string): Promise<unknown> {
    return this.node.json<unknown>(`/config/${encodeURIComponent(option)}`);
  }

  /** A duration option, in milliseconds. */
  async durationMs(option: NsqdDurationOption): Promise<number> {
    return Math.floor(numberOf(await this.config(option), this.address, option) / 1_000_000);
  }

  /** A size or count option. */
  async numberOption(option: NsqdNumberOption): Promise<number> {
    return numberOf(await this.config(option), this.address, option);
  }
}

function numberOf(value: unknown, address: string, option: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new NsqHttpError(address, `GET /config/${option}`, `expected a number, got ${JSON.stringify(value)}`);
  }
  return value;
}

/** An nsqd as nsqlookupd knows it. */
export interface NsqLookupProducer {
  broadcast_address: string;
  hostname: string;
  remote_address?: string;
  tcp_port: number;
  http_port: number;
  version: string;
}

/** A producer's TCP and HTTP addresses, `host:port` each. */
export function producerAddresses(producer: NsqLookupProducer): { tcp: string; http: string } {
  const host = producer.broadcast_address.includes(':') ? `[${producer.broadcast_address}]` : producer.broadcast_address;
  return { tcp: `${host}:${producer.tcp_port}`, http: `${host}:${producer.http_port}` };
}

/** A client of one nsqlookupd's HTTP API (default port 4161). */
export class NsqLookupdHttpApi {
  private readonly node: HttpNode;

  constructor(address: string, options: NsqHttpOptions = {}) {
    this.node = new HttpNode(address, options);
  }

  get address(): string {
    return this.node.address;
  }

  /** The nsqd nodes that have the topic; none when nsqlookupd does not know it. */
  async lookup(topic: string): Promise<NsqLookupProducer[]> {
    const answer = await this.node.json<{ producers?: NsqLookupProducer[] }>('/lookup', { topic }, [404]);
    return answer?.producers ?? [];
  }

  /** Every nsqd registered with this nsqlookupd. */
  async nodes(): Promise<NsqLookupProducer[]> {
    const answer = await this.node.json<{ producers?: NsqLookupProducer[] }>('/nodes');
    return answer?.producers ?? [];
  }
}
