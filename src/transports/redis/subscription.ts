import { checkPrefetch } from '../../transport/arguments.js';
import { leaseEnd } from '../../transport/lease.js';
import type { Redis } from 'ioredis';
import type { Backoff } from '../../backoff/types.js';
import type { Logger } from '../../logger.js';
import type { Clock } from '../../time/clock.js';
import type { Random } from '../../time/random.js';
import type { DeliveryListener, Subscription } from '../../transport/types.js';
import { addressOf, nodeAt, nodeOf, type RedisClient } from './cluster.js';
import { decodeDelivered, type RawEntry } from './codec.js';
import { whileReachable } from './connection.js';
import { RedisDelivery, type DeliveryOwner } from './delivery.js';
import { GROUP, type QueueKeys } from './keys.js';
import type { ScriptRunner } from './scripts/runner.js';
import { CLAIM } from './scripts/claim.js';
import { PROMOTE } from './scripts/promote.js';
import type { Settler, SettleOp, SettleResult } from './settler.js';

/** What a consumer needs to run. */
export interface RedisConsumerSettings {
  readonly queue: string;
  readonly listener: DeliveryListener;
  readonly prefetch: number;
  readonly leaseMs: number;
  readonly batchSize: number;
  readonly pollIntervalMs: number;
  readonly consumer: string;
  readonly keys: QueueKeys;
  /** The `{p}:queues` hash: consuming a queue registers it as a work queue. */
  readonly queuesKey: string;
  /** The transport's command client: the group, the scripts that promote due retries and take over leases, and `CLIENT UNBLOCK`. */
  readonly client: RedisClient;
  readonly scripts: ScriptRunner;
  /** This consumer's own connection (on a cluster, client), for its blocking reads; closed with it. */
  readonly blocking: RedisClient;
  /** Settles and extends this queue's deliveries, on a connection of their own. */
  readonly settler: Settler;
  readonly reconnect: Backoff;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger | undefined;
  /** Called once the subscription is closed, so the transport forgets it. */
  readonly onClosed: (sub: RedisSubscription) => void;
}

const RUNNING = 0;
const PAUSED = 1;
const CLOSED = 2;

/** How often, at most, an unblock is tried while a read has not reached the server yet. */
const UNBLOCK_TRIES = 50;

/**
 * A consumer on one queue. It reads new entries with `XREADGROUP` on a
 * connection of its own, at most `prefetch` unsettled at a time, and takes
 * over entries whose lease ran out.
 *
 * The upkeep (promoting due retries, taking over expired leases) runs on the
 * command connection beside the reads, never before them: the next
 * `XREADGROUP` does not wait for it. A takeover reserves part of the room it
 * may fill (half, at least one) while it runs, so the reads and the entries
 * it takes over together never pass the prefetch; what it takes is handed
 * out when it returns. A delivery keeps its slot until the server answered
 * its settlement (see {@link settled}).
 *
 * Delayed retries wait in the server's sorted set. The consumer keeps one
 * wake-up, for the earliest due time the server reported (or the poll
 * interval, for retries other processes schedule), and at that time moves
 * what is due to the stream on the command connection: the entries it
 * appends serve the read blocked on the consumer's own connection, so a due
 * retry is handed out one round trip after its wake-up, never waiting for
 * the server's block timeout (only as precise as its 100 ms cron). A wake-up
 * while no read is blocked, or one that also looks for expired leases, cuts
 * a blocked read short with `CLIENT UNBLOCK` and lets the read loop do the
 * work. There is no timer per waiting message.
 *
 * On Redis Cluster the read goes to the primary that serves the prefix's
 * slot; the consumer learns its connection's id on that node (ids are per
 * node, so the same number names another client elsewhere) and sends
 * `CLIENT UNBLOCK` to that node only. When the slot moves, the read follows
 * the redirection and the id is learnt again before the next read; an
 * unblock meanwhile finds nothing to cut short, and the read returns by
 * itself within `pollIntervalMs`.
 */
export class RedisSubscription implements Subscription, DeliveryOwner {
  readonly #s: RedisConsumerSettings;
  #prefetch: number;
  #state = RUNNING;
  #outstanding = 0;
  /** Monotonic times of the next promotion of due retries and of the next look for expired leases. */
  #promoteAt = 0;
  #claimAt = 0;
  #groupReady = false;
  /** The promotion under way, which the read loop and a wake-up share. */
  #promoting: Promise<void> | undefined;
  /** The takeover under way, and how much of the room it holds for what it takes. */
  #claiming: Promise<void> | undefined;
  #claimReserved = 0;
  /** How many entries the read under way asked for. */
  #readAsked = 0;
  /** Upkeep failures in a row, which set the wait before the next try. */
  #upkeepFailures = 0;
  /** A blocking read is on its way or blocked. */
  #reading = false;
  /** The id of the connection reads go out on, and that connection, which {@link learnBlockingId} asked. */
  #blockingId: number | undefined;
  #blockingNode: Redis | undefined;
  /** The read or claim under way, which pause and close wait for. */
  #busy: Promise<unknown> = Promise.resolve();
  #kicked: (() => void) | undefined;
  #wake: AbortController | undefined;
  #wakeAt = Infinity;
  #failures = 0;
  /** Aborted on close: ends the waits for the leases of entries whose settlement failed. */
  readonly #closing = new AbortController();
  /** When the current wait after a failure ends (monotonic). */
  #retryAt = 0;
  readonly #loop: Promise<void>;

  constructor(settings: RedisConsumerSettings) {
    this.#s = settings;
    this.#prefetch = settings.prefetch;
    // A reconnection is a new connection with a new id (after a server restart, the old one may name another client): learnt before the next read.
    settings.blocking.on('ready', () => {
      this.#blockingId = undefined;
      this.#blockingNode = undefined;
    });
    this.#loop = this.#run();
  }

  /**
   * Stops handing out entries; resolves once the read and takeover under
   * way have returned, or at once while the server cannot be reached (what
   * such a read returns later is given back uncounted).
   */
  async pause(): Promise<void> {
    if (this.#state !== RUNNING) return;
    this.#state = PAUSED;
    this.#kick();
    await whileReachable([this.#s.client, this.#s.blocking], Promise.all([this.#busy, this.#claiming]));
  }

  async resume(): Promise<void> {
    if (this.#state !== PAUSED) return;
    this.#state = RUNNING;
    this.#kick();
  }

  async setPrefetch(prefetch: number): Promise<void> {
    checkPrefetch(prefetch, 'setPrefetch');
    this.#prefetch = prefetch;
    this.#kick();
  }

  /**
   * Stops reading; deliveries handed out stay held and may still be
   * settled. While the server cannot be reached it does not wait for the
   * read under way: closing the consumer's connection ends it.
   */
  async close(): Promise<void> {
    if (this.#state === CLOSED) return;
    this.#state = CLOSED;
    this.#closing.abort();
    this.#cancelWake();
    this.#kick();
    await whileReachable([this.#s.client, this.#s.blocking], Promise.all([this.#loop, this.#promoting?.catch(() => undefined), this.#claiming]));
    this.#s.onClosed(this);
    this.#s.blocking.disconnect();
  }

  /**
   * Sends `op`. A retry written wakes this consumer when it falls due,
   * counted from now rather than from the reply: the server counts from a
   * moment later, so the wake-up is never late by the reply's way back (or a
   * busy event loop); one a little early finds nothing due and waits what
   * the server says is left.
   */
  settle(op: SettleOp): Promise<SettleResult> {
    if (op.kind !== 'r') return this.#s.settler.settle(op);
    const dueAt = this.#s.clock.monotonic() + op.delayMs;
    return this.#s.settler.settle(op).then((result) => {
      if (result === 1) this.notifyDue(dueAt);
      return result;
    });
  }

  get clock(): Clock {
    return this.#s.clock;
  }

  extend(entryId: string, count: number, ms: number): Promise<boolean> {
    return this.#s.settler.extend(entryId, count, ms, this.#s.leaseMs);
  }

  /**
   * A delivery's slot is freed once the server answered its settlement, not
   * when it is sent. Freed at sending, a consumer whose settlements fail
   * while its reads succeed (a server out of memory refuses the settlement
   * scripts but serves `XREADGROUP`) would go on taking new entries it
   * cannot settle, each held until its lease runs out and then delivered
   * again; held until answered, such entries never outnumber the prefetch,
   * and a paused or probing consumer (prefetch 0 or 1) has no entry in
   * flight beyond it. Settlements go on their own connection, so their
   * answers do not wait behind sends or the upkeep.
   */
  settled(): void {
    this.#outstanding--;
    this.#kick();
  }

  heldAfterFailure(free: () => void): void {
    this.#s.clock.sleep(this.#s.leaseMs, this.#closing.signal).then(free, () => undefined);
  }

  /** A retry or delayed send on this queue becomes due at monotonic time `at`: wake up then if that is sooner than planned. */
  notifyDue(at: number): void {
    if (this.#state === CLOSED) return;
    if (at >= this.#promoteAt) return;
    this.#promoteAt = at;
    this.#arm();
  }

  async #run(): Promise<void> {
    while (this.#state !== CLOSED) {
      if (this.#state === PAUSED) {
        await this.#nextKick();
        continue;
      }
      try {
        if (!this.#groupReady) await this.#createGroup();
        this.#upkeep();
        if (this.#readRoom() <= 0 || this.#state !== RUNNING) {
          if (this.#state === RUNNING) await this.#nextKick();
          continue;
        }
        await this.#busyWith(this.#read());
        this.#recovered();
      } catch (error) {
        if (/NOGROUP/.test((error as Error)?.message ?? '')) {
          // The stream was deleted (and maybe created again by a send): join it again from its first entry.
          this.#groupReady = false;
          continue;
        }
        await this.#failed(error);
      }
    }
  }

  #busyWith<T>(work: Promise<T>): Promise<T> {
    this.#busy = work.catch(() => undefined);
    return work;
  }

  #room(): number {
    return this.#prefetch - this.#outstanding;
  }

  /** The room a new read or takeover may fill: not what the read and takeover under way may bring. */
  #readRoom(): number {
    return this.#room() - this.#claimReserved - this.#readAsked;
  }

  /**
   * Starts what is due of the upkeep, without waiting for it: the promotion
   * of due retries, and the takeover of expired leases while there is room.
   * Then keeps the wake-up for the next.
   */
  #upkeep(): void {
    const s = this.#s;
    if (this.#state !== RUNNING || !this.#groupReady) return;
    const now = s.clock.monotonic();
    if (now >= this.#promoteAt && this.#promoting === undefined) {
      this.#promoteOnce().then(
        () => this.#upkeepDone(),
        (error) => {
          this.#promoteAt = this.#upkeepFailed(error);
        },
      );
    }
    const room = this.#readRoom();
    if (room > 0 && now >= this.#claimAt && this.#claiming === undefined) {
      const share = Math.max(1, Math.floor(room / 2));
      this.#claimReserved = share;
      this.#claiming = this.#claimExpired(share)
        .then(
          () => this.#upkeepDone(),
          (error) => {
            this.#claimAt = this.#upkeepFailed(error);
          },
        )
        .finally(() => {
          this.#claiming = undefined;
          this.#claimReserved = 0;
          this.#kick();
          this.#arm();
        });
    } else if (room <= 0 && now >= this.#claimAt && this.#claiming === undefined && this.#reading) {
      // A takeover is due but the blocked read holds the room: cut it short, the loop takes over before reading again.
      void this.#unblock();
    }
    this.#arm();
  }

  #upkeepDone(): void {
    this.#upkeepFailures = 0;
    this.#arm();
  }

  /**
   * Logs an upkeep failure (the first and every tenth in a row) and returns
   * when to try again: after the reconnect backoff. The reads go on meanwhile.
   */
  #upkeepFailed(error: unknown): number {
    const s = this.#s;
    this.#upkeepFailures++;
    const delay = Math.max(0, s.reconnect({ attempt: this.#upkeepFailures, previousDelayMs: undefined, elapsedMs: 0, random: s.random }) ?? s.pollIntervalMs);
    if (this.#upkeepFailures === 1 || this.#upkeepFailures % 10 === 0) {
      s.logger?.warn({ err: error, queue: s.queue, attempt: this.#upkeepFailures }, `redis: upkeep of ${s.queue} failed (${(error as Error)?.message}); trying again in ${Math.round(delay)} ms`);
    }
    const at = s.clock.monotonic() + delay;
    queueMicrotask(() => this.#arm());
    return at;
  }

  async #createGroup(): Promise<void> {
    const s = this.#s;
    try {
      await s.client.xgroup('CREATE', s.keys.stream, GROUP, '0', 'MKSTREAM');
    } catch (error) {
      if (!/BUSYGROUP/.test((error as Error)?.message ?? '')) throw error;
    }
    await s.client.hsetnx(s.queuesKey, s.queue, 'work');
    this.#groupReady = true;
  }

  /** Learns the id of the connection the next read goes out on, unless already known: on a cluster, the blocking client's connection to the stream's primary. */
  async #learnBlockingId(): Promise<void> {
    const node = nodeOf(this.#s.blocking, this.#s.keys.stream);
    if (node !== undefined && node === this.#blockingNode) return;
    this.#blockingId = undefined;
    this.#blockingNode = undefined;
    if (node === undefined) return;
    try {
      this.#blockingId = Number(await node.client('ID'));
      this.#blockingNode = node;
    } catch {
      // Learnt before the next read.
    }
  }

  /** Moves due retries to the stream, or joins the move already under way. */
  #promoteOnce(): Promise<void> {
    this.#promoting ??= this.#promote().finally(() => {
      this.#promoting = undefined;
    });
    return this.#promoting;
  }

  /** Moves due retries to the stream; a due time learnt meanwhile (see {@link notifyDue}) is kept when sooner than the server's answer. */
  async #promote(): Promise<void> {
    const s = this.#s;
    const asked = this.#promoteAt;
    const [, wait] = (await s.scripts.run(PROMOTE, [s.keys.stream, s.keys.delayed, s.keys.delayedData], [s.batchSize * 10])) as [number, number];
    const next = s.clock.monotonic() + (wait < 0 ? s.pollIntervalMs : Math.min(wait, s.pollIntervalMs));
    this.#promoteAt = this.#promoteAt < asked ? Math.min(this.#promoteAt, next) : next;
  }

  /** Takes over at most `most` entries whose lease ran out; when it found that many, looks again at once. */
  async #claimExpired(most: number): Promise<void> {
    const s = this.#s;
    const sentAt = s.clock.monotonic();
    const reply = (await s.scripts.run(CLAIM, [s.keys.stream, s.keys.leases], [GROUP, s.consumer, s.leaseMs, most])) as [Buffer, RawEntry[1], number][];
    this.#claimAt = reply.length >= most ? 0 : s.clock.monotonic() + s.pollIntervalMs;
    this.#claimReserved = 0;
    for (const [entryId, fields, count] of reply) this.#take([entryId, fields], Number(count), sentAt);
  }

  async #read(): Promise<void> {
    const s = this.#s;
    await this.#learnBlockingId();
    const count = Math.min(s.batchSize, this.#readRoom());
    this.#reading = true;
    this.#readAsked = count;
    let reply: unknown;
    // A read blocks at most half the lease: an entry it brings at the end of its wait still has half its lease.
    const blockMs = Math.max(1, Math.min(s.pollIntervalMs, Math.floor(s.leaseMs / 2)));
    const sentAt = s.clock.monotonic();
    try {
      reply = await s.blocking.callBuffer('XREADGROUP', 'GROUP', GROUP, s.consumer, 'COUNT', count, 'BLOCK', blockMs, 'STREAMS', s.keys.stream, '>');
    } finally {
      this.#reading = false;
      this.#readAsked = 0;
    }
    for (const raw of entriesOf(reply)) this.#take(raw, 1, sentAt);
  }

  /**
   * Hands out an entry read or claimed, or gives it back uncounted when the
   * consumer stopped meanwhile. Its lease runs from when the command that
   * brought it was sent: the server started it later, when it ran the
   * command. An entry whose reply came after that lease ran out (held back in
   * a stalled connection) is not handed out: another consumer may have taken
   * it over already, and will once its lease runs out on the server.
   */
  #take(raw: RawEntry, count: number, sentAt: number): void {
    const s = this.#s;
    const { entry, problem } = decodeDelivered(raw);
    if (problem !== undefined) s.logger?.warn({ queue: s.queue, entryId: entry.entryId }, `redis: ${problem}; delivered with its stream id as message id and no headers`);
    const now = s.clock.monotonic();
    if (now > leaseEnd(sentAt, s.leaseMs)) {
      s.logger?.info({ queue: s.queue, entryId: entry.entryId }, `redis: entry ${entry.entryId} of ${s.queue} arrived after its lease ran out (its command was sent ${Math.round(now - sentAt)} ms ago); another consumer takes it over`);
      return;
    }
    this.#outstanding++;
    const delivery = new RedisDelivery(this, s.queue, entry.entryId, count, entry.inherited, entry.id, Buffer.from(entry.body.buffer, entry.body.byteOffset, entry.body.byteLength), entry.headers, s.leaseMs, sentAt);
    if (this.#state !== RUNNING) {
      // Read after a pause or close: back to the end of the stream, this delivery not counted.
      this.settle({ kind: 'l', entryId: entry.entryId, count, inherit: count - 1 }).then(() => this.settled(), () => this.settled());
      return;
    }
    try {
      s.listener(delivery);
    } catch {
      // A listener that throws cannot have taken the delivery on: give it back.
      delivery.release().catch(() => undefined);
    }
  }

  #recovered(): void {
    if (this.#failures === 0) return;
    this.#failures = 0;
    this.#retryAt = 0;
    this.#s.logger?.info({ queue: this.#s.queue }, `redis: consumer of ${this.#s.queue} is reading again`);
  }

  /**
   * Waits before the next try after a read, promotion or claim failed. A
   * settlement that finishes cuts the wait short (room to read again), so a
   * failure only counts towards a longer wait when the previous wait ran its
   * course: a burst of early tries during an outage does not push the next
   * wait to the backoff's cap.
   */
  async #failed(error: unknown): Promise<void> {
    const s = this.#s;
    const now = s.clock.monotonic();
    const counted = now >= this.#retryAt;
    if (counted) this.#failures++;
    const delay = Math.max(0, s.reconnect({ attempt: this.#failures, previousDelayMs: undefined, elapsedMs: 0, random: s.random }) ?? s.pollIntervalMs);
    if (counted) {
      this.#retryAt = now + delay;
      if (this.#failures === 1 || this.#failures % 10 === 0) {
        s.logger?.warn({ err: error, queue: s.queue, attempt: this.#failures }, `redis: consumer of ${s.queue} failed (${(error as Error)?.message}); trying again in ${Math.round(delay)} ms`);
      }
    }
    const controller = new AbortController();
    this.#kicked = () => controller.abort();
    await s.clock.sleep(Math.min(Math.max(0, this.#retryAt - now), 2 ** 31 - 1), controller.signal).catch(() => undefined);
  }

  /** Waits for a settlement, a wake-up, a resume, a new prefetch or a close. */
  #nextKick(): Promise<void> {
    return new Promise((resolve) => {
      this.#kicked = resolve;
    });
  }

  #kick(): void {
    const kicked = this.#kicked;
    this.#kicked = undefined;
    kicked?.();
    if (this.#state !== RUNNING || this.#readRoom() < 0) void this.#unblock();
  }

  /**
   * Keeps one timer, for the sooner of the next promotion and the next look
   * for expired leases; not for one under way (its end arms again), nor for
   * a look while there is no room (the loop starts it once there is).
   */
  #arm(): void {
    const promoteAt = this.#promoting === undefined ? this.#promoteAt : Infinity;
    // While the blocked read holds the room, the wake-up for a takeover cuts it short once; the loop then starts the takeover.
    const claimable = this.#claiming === undefined && (this.#readRoom() > 0 || (this.#reading && this.#claimAt > this.#s.clock.monotonic()));
    const claimAt = claimable ? this.#claimAt : Infinity;
    const at = Math.min(promoteAt, claimAt);
    if (at === this.#wakeAt && this.#wake !== undefined) return;
    this.#cancelWake();
    if (this.#state === CLOSED) return;
    const controller = new AbortController();
    this.#wake = controller;
    this.#wakeAt = at;
    const ms = Math.max(0, Math.min(at - this.#s.clock.monotonic(), 2 ** 31 - 1));
    this.#s.clock.sleep(ms, controller.signal).then(
      () => {
        if (this.#wake !== controller) return;
        this.#wake = undefined;
        this.#wakeAt = Infinity;
        if (this.#state === RUNNING) this.#upkeep();
        else this.#kick();
      },
      () => undefined,
    );
  }

  #cancelWake(): void {
    this.#wake?.abort();
    this.#wake = undefined;
    this.#wakeAt = Infinity;
  }

  /** Cuts a blocked read short. A read that has not reached the server yet is tried again until it has, or has returned. */
  async #unblock(): Promise<void> {
    for (let i = 0; i < UNBLOCK_TRIES && this.#reading; i++) {
      const id = this.#blockingId;
      const reader = this.#blockingNode;
      // The id names a client of the node the read went to: ask that node, never another.
      const node = reader === undefined ? undefined : nodeAt(this.#s.client, addressOf(reader));
      if (id === undefined || node === undefined) return;
      const done = await node.client('UNBLOCK', id, 'TIMEOUT').catch(() => 0);
      if (done === 1 || !this.#reading) return;
      await this.#s.clock.sleep(2).catch(() => undefined);
    }
  }
}

/** The entries of an `XREADGROUP` reply for one stream, in either protocol's shape. */
function entriesOf(reply: unknown): RawEntry[] {
  if (!Array.isArray(reply) || reply.length === 0) return [];
  // RESP3 (a map, flattened): [stream, entries]. RESP2: [[stream, entries]].
  const pair = Array.isArray(reply[0]) ? reply[0] : reply;
  const entries = pair[1];
  return Array.isArray(entries) ? (entries as RawEntry[]) : [];
}
