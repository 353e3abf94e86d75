/**
 * Lease marks on one NSQ connection, with a fake connection and clock: the
 * mark on the wire, one at a time, and a lease start taken from the send
 * time of the last mark answered. And the `leaseMarkMs` option's bounds.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../../src/time/fake-clock.js';
import type { NsqjsConnection } from '../../../src/transports/nsq/nsqjs.js';
import { resolveNsqOptions } from '../../../src/transports/nsq/options.js';
import { LEASE_MARK_ID, LinkConnection } from '../../../src/transports/nsq/reader-link.js';

/** A connection that records what is written to its socket. */
function fakeConnection(): { connection: NsqjsConnection; written: string[] } {
  const written: string[] = [];
  const conn = { destroyed: false, destroy() {}, cork() {}, uncork() {}, write: (data: Uint8Array) => written.push(new TextDecoder().decode(data)) > 0 };
  const connection = Object.assign(new EventEmitter(), { maxRdyCount: 2500, msgTimeout: 2_000, maxMsgTimeout: 900_000, conn, connect() {}, setRdy() {}, close() {}, destroy() {} });
  return { connection: connection as unknown as NsqjsConnection, written };
}

const markAnswer = new Error(`E_FIN_FAILED FIN ${LEASE_MARK_ID} failed ID not in flight`);

describe('NSQ lease marks', () => {
  it('the mark is a FIN of a 16-byte id that is not hexadecimal, so never a message of nsqd', () => {
    expect(Buffer.byteLength(LEASE_MARK_ID)).toBe(16);
    expect(/^[0-9a-f]+$/.test(LEASE_MARK_ID)).toBe(false);
  });

  it('counts a lease from the send time of the last mark answered, one mark on the wire at a time', async () => {
    const clock = new FakeClock(1_000);
    const { connection, written } = fakeConnection();
    const link = new LinkConnection('127.0.0.1:4150', connection, 2_000, 900_000, 2500, clock, true);
    // Before any answer: from when the connection became ready, before its first RDY.
    const readyAt = clock.monotonic();
    await clock.advance(500);
    expect(link.leaseStart()).toBe(readyAt);

    link.sendMark();
    expect(written).toEqual([`FIN ${LEASE_MARK_ID}\n`]);
    const firstSentAt = clock.monotonic();
    await clock.advance(100);
    // Still on its way: no second mark, and the lease start has not moved.
    link.sendMark();
    expect(written).toHaveLength(1);
    expect(link.leaseStart()).toBe(readyAt);

    expect(link.takeMarkAnswer(markAnswer)).toBe(true);
    expect(link.leaseStart()).toBe(firstSentAt);

    // A stall: the next mark goes out and its answer is held; every arrival meanwhile counts from the last answer.
    link.sendMark();
    const secondSentAt = clock.monotonic();
    await clock.advance(3_000);
    expect(link.leaseStart()).toBe(firstSentAt);
    expect(link.takeMarkAnswer(markAnswer)).toBe(true);
    expect(link.leaseStart()).toBe(secondSentAt);
  });

  it('other errors are not taken as a mark answer; without marks a lease counts from now and nothing is written', async () => {
    const clock = new FakeClock(0);
    const { connection, written } = fakeConnection();
    const link = new LinkConnection('127.0.0.1:4150', connection, 2_000, 900_000, 2500, clock, false);
    expect(link.takeMarkAnswer(new Error('E_FIN_FAILED FIN 0a1b2c3d4e5f6a7b failed ID not in flight'))).toBe(false);
    await clock.advance(250);
    expect(link.leaseStart()).toBe(250);
    // The subscription sends marks only when the connection is marked; a closed one never writes.
    link.open = false;
    link.sendMark();
    expect(written).toEqual([]);
  });

  it('leaseMarkMs: 0 (the default) or from 10 ms to half the lease', () => {
    expect(resolveNsqOptions({}).leaseMarkMs).toBe(0);
    expect(resolveNsqOptions({ leaseMarkMs: 0 }).leaseMarkMs).toBe(0);
    expect(resolveNsqOptions({ leaseMarkMs: 10 }).leaseMarkMs).toBe(10);
    expect(resolveNsqOptions({ leaseMs: 2_000, leaseMarkMs: 1_000 }).leaseMarkMs).toBe(1_000);
    expect(() => resolveNsqOptions({ leaseMarkMs: 5 })).toThrow(/leaseMarkMs.*from 10 to 15000, got 5/);
    expect(() => resolveNsqOptions({ leaseMs: 2_000, leaseMarkMs: 1_001 })).toThrow(RangeError);
    expect(() => resolveNsqOptions({ leaseMarkMs: 1.5 })).toThrow(RangeError);
    expect(() => resolveNsqOptions({ leaseMarkMs: Number.NaN })).toThrow(RangeError);
  });
});
