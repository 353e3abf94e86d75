/**
 * One pass of the error-queue operations over a channel of one nsqd: a TCP
 * connection of its own that subscribes to the channel, asks for the
 * messages the channel held when the pass began (RDY), and holds them in
 * flight (TOUCHing them while the pass lasts) until the pass either FINs
 * them (removed) or gives them back with `REQ 0` at its end.
 *
 * NSQ has no peek, so this is how an entry is read without being taken.
 * A message given back goes to the tail of the channel's queue; the
 * operations order entries by the time nsqd first took the message, which
 * a REQ keeps, so the order an operator sees does not change.
 *
 * The pass knows it has read everything it can by asking nsqd's HTTP
 * `/stats`: once the channel has nothing ready and the pass's connection
 * has received every message nsqd counts in flight to it, the rest of the
 * snapshot is held by another reader (or deferred).
 *
 * A pass holds its messages on a lease of its own (`msg_timeout` in
 * IDENTIFY, {@link PASS_LEASE_MS} unless the node allows less), TOUCHed
 * while it lasts. nsqd does not give back the messages of a connection that
 * closes; it waits for their lease to run out. So when a pass (or any
 * reader) dies holding entries, they come back within its lease, and a pass
 * that begins while the channel has messages in flight to no connected
 * client waits that long for them before it reads.
 */
import { Socket } from 'node:net';
import type { NsqChannelStats, NsqClientStats, NsqdHttpApi } from './http-api.js';

/** The lease a pass asks nsqd for on the messages it holds (IDENTIFY `msg_timeout`), ms. */
export const PASS_LEASE_MS = 10_000;

/** One message held by a pass. */
export interface HeldMessage {
  /** NSQ's message id (16 characters), kept across REQs. */
  readonly nsqId: string;
  /** When nsqd first took the message, in nanoseconds since the epoch. */
  readonly timestamp: bigint;
  /** How often nsqd has delivered it (every pass that reads it counts one). */
  readonly attempts: number;
  readonly body: Uint8Array;
}

/** How a pass connects and how long it waits. */
export interface PassOptions {
  /** nsqd's TCP address, `host:port`. */
  readonly tcp: string;
  /** The same nsqd's HTTP API, for `/stats`. */
  readonly http: NsqdHttpApi;
  readonly topic: string;
  readonly channel: string;
  /** The `client_id` the connection gives in IDENTIFY. */
  readonly clientId: string;
  /** The most messages the pass may hold; a channel with more ready is refused before anything is read (unless `limit` is given). */
  readonly maxHeld: number;
  /** Read only the first `limit` ready messages (at most `maxHeld`). Default: every ready message. */
  readonly limit?: number;
  /** Longest wait for one answer of nsqd. */
  readonly timeoutMs: number;
  /**
   * The lease on held messages, ms: at least 1 000, at most the node's
   * `--max-msg-timeout`. Default {@link PASS_LEASE_MS}.
   */
  readonly leaseMs?: number;
  /**
   * Longest wait, before reading, for messages in flight to no connected
   * client (a reader that died holding them) to come back. Default: the
   * lease plus a second.
   */
  readonly orphanWaitMs?: number;
  /** What is being done, for errors. */
  readonly operation: string;
}

/** A channel holds more ready messages than one pass may hold. */
export class PassLimitError extends Error {
  override readonly name: string = 'PassLimitError';
  constructor(
    readonly topic: string,
    readonly ready: number,
    readonly limit: number,
    operation: string,
  ) {
    super(
      `nsq: cannot ${operation}: '${topic}' holds ${ready} entries, more than one pass can hold in flight (${limit}, nsqd's --max-rdy-count); ` +
        'nothing was changed; delete or send back entries in smaller steps, or raise --max-rdy-count',
    );
  }
}

/** The connection of a pass failed; every message it held goes back to the channel when nsqd's msg_timeout runs out. */
export class PassConnectionError extends Error {
  override readonly name: string = 'PassConnectionError';
  constructor(address: string, operation: string, why: string) {
    super(`nsq: ${operation} on ${address}: ${why}`);
  }
}

const FRAME_RESPONSE = 0;
const FRAME_ERROR = 1;
const FRAME_MESSAGE = 2;
/** Between two `/stats` probes while no message arrives, ms. */
const PROBE_INTERVAL_MS = 20;
/** Between two `/stats` probes while waiting for messages of a dead reader, ms. */
const ORPHAN_PROBE_INTERVAL_MS = 100;

/** A reply frame nsqd sent (not a message). */
type Reply = { readonly kind: 'response' | 'error'; readonly text: string };

export class ChannelPass {
  /** Messages ready in the channel when the pass began: the most it asks nsqd for. */
  readonly snapshot: number;
  /** Messages ready or in flight (to anyone) in the channel when the pass began. */
  readonly #present: number;
  readonly #leaseMs: number;
  readonly #socket: Socket;
  readonly #options: PassOptions;
  readonly #held = new Map<string, HeldMessage>();
  readonly #arrived: HeldMessage[] = [];
  readonly #replies: Reply[] = [];
  #wake: (() => void) | undefined;
  #buffer: Buffer = Buffer.alloc(0);
  #failure: Error | undefined;
  #received = 0;
  #ended = false;
  #touchTimer: ReturnType<typeof setInterval> | undefined;
  #finished: Promise<boolean> | undefined;
  /** Errors nsqd reported for FIN/REQ/TOUCH (non-fatal on nsqd's side). */
  readonly settleErrors: string[] = [];

  private constructor(socket: Socket, options: PassOptions, snapshot: number, present: number, leaseMs: number) {
    this.#present = present;
    this.#leaseMs = leaseMs;
    this.#socket = socket;
    this.#options = options;
    this.snapshot = snapshot;
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('error', (error) => this.#fail(new PassConnectionError(options.tcp, options.operation, error.message)));
    socket.on('close', () => this.#fail(new PassConnectionError(options.tcp, options.operation, 'the connection closed')));
  }

  /**
   * Reads the channel's ready count, connects, subscribes and asks for that
   * many messages. The channel is created by the subscription when it does
   * not exist (it then receives what its topic held with no channel).
   */
  static async open(options: PassOptions): Promise<ChannelPass> {
    const leaseMs = options.leaseMs ?? PASS_LEASE_MS;
    const stats = await untilNoOrphans(options, options.orphanWaitMs ?? leaseMs + 1_000);
    const topic = stats === undefined ? await options.http.topicStats(options.topic) : undefined;
    // Without our channel, a topic with no channel at all holds its messages itself; the subscription moves them to the channel.
    const ready = stats?.depth ?? (topic !== undefined && topic.channels.length === 0 ? topic.depth : 0);
    const snapshot = options.limit === undefined ? ready : Math.min(ready, options.limit, options.maxHeld);
    if (snapshot > options.maxHeld) throw new PassLimitError(options.topic, ready, options.maxHeld, options.operation);
    const socket = await connect(options);
    const present = options.limit === undefined ? snapshot + (stats?.in_flight_count ?? 0) : snapshot;
    const pass = new ChannelPass(socket, options, snapshot, present, leaseMs);
    try {
      socket.write('  V2');
      const identify = Buffer.from(JSON.stringify({ client_id: options.clientId, hostname: options.clientId, user_agent: 'redeliver-operations', feature_negotiation: false, msg_timeout: leaseMs }));
      const size = Buffer.alloc(4);
      size.writeUInt32BE(identify.length);
      socket.write(Buffer.concat([Buffer.from('IDENTIFY\n'), size, identify]));
      await pass.#expectOk('IDENTIFY');
      socket.write(`SUB ${options.topic} ${options.channel}\n`);
      await pass.#expectOk('SUB');
      if (snapshot > 0) socket.write(`RDY ${snapshot}\n`);
      else pass.#ended = true;
    } catch (error) {
      socket.destroy();
      throw error;
    }
    return pass;
  }

  /** Messages read so far. */
  get read(): number {
    return this.#received;
  }

  /**
   * Messages in the channel when the pass began (ready or in flight, not
   * deferred) that it never read: another reader held them.
   */
  get unseen(): number {
    return this.#ended ? Math.max(0, this.#present - this.#received) : 0;
  }

  /**
   * Reads the whole snapshot: every message nsqd gives this pass, held in
   * flight, until the snapshot is read or nsqd has nothing more for it.
   * TOUCHes what it holds every third of its lease until {@link finish}.
   */
  async readAll(): Promise<HeldMessage[]> {
    this.#touchTimer ??= setInterval(() => this.#touchAll(), Math.max(300, Math.floor(this.#leaseMs / 3)));
    this.#touchTimer.unref?.();
    while (!this.#ended && this.#received < this.snapshot) {
      if (this.#failure) throw this.#failure;
      if (this.#arrived.length > 0) {
        this.#arrived.length = 0;
        continue;
      }
      const arrived = new Promise<void>((resolve) => (this.#wake = resolve));
      const probe = delay(PROBE_INTERVAL_MS).then(() => 'probe' as const);
      if ((await Promise.race([arrived.then(() => 'arrived' as const), probe])) === 'probe' && this.#arrived.length === 0) {
        if (await this.#nothingMoreComing()) this.#ended = true;
      }
    }
    if (this.#failure) throw this.#failure;
    this.#ended = true;
    return [...this.#held.values()];
  }

  /** Removes a held message (`FIN`). */
  fin(message: HeldMessage): void {
    if (!this.#held.delete(message.nsqId)) return;
    this.#socket.write(`FIN ${message.nsqId}\n`);
  }

  /**
   * Gives back every message still held and closes: `RDY 0` (so nothing new
   * comes), `REQ 0` for each held message in the order read, `CLS`; then
   * asks `/stats` until nsqd counts nothing in flight to this connection,
   * giving back anything that was on its way meanwhile. Resolves whether
   * that was confirmed with no error from nsqd for any FIN or REQ; after a
   * connection failure nsqd gives the held messages back itself once their
   * msg_timeout runs out.
   */
  finish(): Promise<boolean> {
    this.#finished ??= this.#finish();
    return this.#finished;
  }

  async #finish(): Promise<boolean> {
    if (this.#touchTimer) clearInterval(this.#touchTimer);
    this.#ended = true;
    if (this.#failure) {
      this.#socket.destroy();
      return false;
    }
    try {
      this.#socket.write('RDY 0\n');
      this.#giveBack();
      this.#socket.write('CLS\n');
      const reply = await this.#reply('CLS');
      if (reply.kind !== 'response' || reply.text !== 'CLOSE_WAIT') return false;
      const deadline = performance.now() + this.#options.timeoutMs;
      for (;;) {
        this.#giveBack();
        const self = await this.#selfStats();
        if (self === undefined || self.in_flight_count === 0) return this.#held.size === 0 && this.settleErrors.length === 0 && !this.#failure;
        if (this.#failure || performance.now() > deadline) return false;
        await delay(PROBE_INTERVAL_MS);
      }
    } catch {
      return false;
    } finally {
      this.#socket.destroy();
    }
  }

  #giveBack(): void {
    for (const message of this.#held.values()) this.#socket.write(`REQ ${message.nsqId} 0\n`);
    this.#held.clear();
  }

  /** This connection as nsqd's `/stats` lists it, or undefined when the channel is gone. */
  async #selfStats(): Promise<NsqClientStats | { in_flight_count: number } | undefined> {
    const channel = await this.#options.http.channelStats(this.#options.topic, this.#options.channel);
    if (channel === undefined) return undefined;
    const local = `${this.#socket.localAddress}:${this.#socket.localPort}`;
    return channel.clients.find((c) => c.remote_address === local) ?? { in_flight_count: 0 };
  }

  /** Whether nsqd has nothing more for this pass: nothing ready in the channel, and nothing in flight to this connection unread. */
  async #nothingMoreComing(): Promise<boolean> {
    const channel = await this.#options.http.channelStats(this.#options.topic, this.#options.channel);
    if (channel === undefined) return true;
    const local = `${this.#socket.localAddress}:${this.#socket.localPort}`;
    const inFlightToUs = channel.clients.find((c) => c.remote_address === local)?.in_flight_count ?? 0;
    return channel.depth === 0 && inFlightToUs <= this.#received && this.#arrived.length === 0;
  }

  #touchAll(): void {
    if (this.#failure) return;
    for (const id of this.#held.keys()) this.#socket.write(`TOUCH ${id}\n`);
  }

  async #expectOk(command: string): Promise<void> {
    const reply = await this.#reply(command);
    if (reply.kind === 'error' || reply.text !== 'OK') throw new PassConnectionError(this.#options.tcp, this.#options.operation, `${command} was refused: ${reply.text}`);
  }

  /** The next reply frame, within `timeoutMs`. */
  async #reply(command: string): Promise<Reply> {
    const deadline = performance.now() + this.#options.timeoutMs;
    for (;;) {
      if (this.#replies.length > 0) return this.#replies.shift()!;
      if (this.#failure) throw this.#failure;
      const left = deadline - performance.now();
      if (left <= 0) throw new PassConnectionError(this.#options.tcp, this.#options.operation, `no answer to ${command} within ${this.#options.timeoutMs} ms`);
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([new Promise<void>((resolve) => (this.#wake = resolve)), new Promise<void>((resolve) => (timer = setTimeout(resolve, left)))]);
      clearTimeout(timer);
    }
  }

  #onData(chunk: Buffer): void {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    while (this.#buffer.length >= 8) {
      const size = this.#buffer.readUInt32BE(0);
      if (this.#buffer.length < 4 + size) break;
      const type = this.#buffer.readUInt32BE(4);
      const data = this.#buffer.subarray(8, 4 + size);
      this.#buffer = this.#buffer.subarray(4 + size);
      this.#onFrame(type, data);
    }
    this.#wake?.();
  }

  #onFrame(type: number, data: Buffer): void {
    if (type === FRAME_MESSAGE) {
      const message: HeldMessage = {
        timestamp: data.readBigInt64BE(0),
        attempts: data.readUInt16BE(8),
        nsqId: data.subarray(10, 26).toString('latin1'),
        body: new Uint8Array(data.subarray(26)),
      };
      this.#received++;
      this.#held.set(message.nsqId, message);
      this.#arrived.push(message);
      return;
    }
    const text = data.toString('utf8');
    if (type === FRAME_RESPONSE && text === '_heartbeat_') {
      this.#socket.write('NOP\n');
      return;
    }
    if (type === FRAME_ERROR && /^E_(FIN|REQ|TOUCH)_FAILED/.test(text)) {
      this.settleErrors.push(text);
      return;
    }
    this.#replies.push({ kind: type === FRAME_ERROR ? 'error' : 'response', text });
  }

  #fail(error: Error): void {
    this.#failure ??= error;
    this.#wake?.();
  }
}

/**
 * The channel's stats once nothing in it is in flight to a client nsqd no
 * longer lists (a reader that closed or died holding messages; nsqd gives
 * them back when their lease runs out), or after `waitMs` as they are.
 */
async function untilNoOrphans(options: PassOptions, waitMs: number): Promise<NsqChannelStats | undefined> {
  const deadline = performance.now() + waitMs;
  for (;;) {
    const stats = await options.http.channelStats(options.topic, options.channel);
    if (stats === undefined) return undefined;
    const held = stats.clients.reduce((n, c) => n + c.in_flight_count, 0);
    if (stats.in_flight_count <= held || performance.now() >= deadline) return stats;
    await delay(ORPHAN_PROBE_INTERVAL_MS);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function connect(options: PassOptions): Promise<Socket> {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(options.tcp);
  if (!match) throw new RangeError(`nsq: ${JSON.stringify(options.tcp)} is not a host:port address`);
  const socket = new Socket();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new PassConnectionError(options.tcp, options.operation, `no connection within ${options.timeoutMs} ms`));
    }, options.timeoutMs);
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(new PassConnectionError(options.tcp, options.operation, error.message));
    });
    socket.connect(Number(match[3]), match[1] ?? match[2]!, () => {
      clearTimeout(timer);
      socket.setNoDelay(true);
      resolve(socket);
    });
  });
}
