/**
 * On an nsqd of the test's own (ports 4350-4351, a temporary data
 * directory, `--max-req-timeout=2s`): delays longer than nsqd holds are
 * carried in hops, and publishing comes back after nsqd restarts (nsqjs's
 * `Writer` never reconnects).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NsqTransport } from '../../../src/transports/nsq/index.js';
import type { Delivery } from '../../../src/transport/types.js';
import { nsqNodeSkipReason } from '../../support/nsq-node.js';
import { nsqdHttp, topicName, until } from './support.js';

const skip = nsqNodeSkipReason();
const TCP = '127.0.0.1:4350';
const HTTP = '127.0.0.1:4351';
const dir = mkdtempSync(join(tmpdir(), 'redeliver-nsq-own-'));
let nsqd: ChildProcess | undefined;

async function boot(): Promise<void> {
  nsqd = spawn(join(homedir(), '.cache/redeliver/brokers/nsq/1.3.0/bin/nsqd'), [`--tcp-address=${TCP}`, `--http-address=${HTTP}`, `--data-path=${dir}`, '--max-req-timeout=2s'], { stdio: 'ignore' });
  await until('own nsqd to answer', async () => nsqdHttp(HTTP).ping().then(() => true, () => false));
}

async function stop(): Promise<void> {
  const child = nsqd;
  if (child === undefined || child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

beforeAll(async () => {
  if (!skip) await boot();
});
afterAll(async () => {
  await stop();
  rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(Boolean(skip))('nsq on an nsqd of its own', () => {
  it('a delay longer than --max-req-timeout is held in hops, never early, and the message keeps its id and headers', async () => {
    const transport = new NsqTransport({ nsqd: [TCP], connectionBackoff: () => 100 });
    const queue = topicName('hops');
    const got: { d: Delivery; at: number }[] = [];
    await transport.consume(queue, (d) => got.push({ d, at: Date.now() }), { prefetch: 5 });
    const sentAt = Date.now();
    await transport.send(queue, { id: 'hop-1', body: new TextEncoder().encode('x'), headers: { keep: 'y' }, delayMs: 4_500 });
    await until('the hopped message', () => got.length === 1, 15_000);
    expect(got[0]!.at - sentAt).toBeGreaterThanOrEqual(4_500 - 5);
    expect(got[0]!.d.id).toBe('hop-1');
    expect(got[0]!.d.headers).toEqual({ keep: 'y' });
    expect(got[0]!.d.deliveryCount).toBe(1);
    await got[0]!.d.ack();
    await transport.close();
  }, 30_000);

  it('publishing comes back after nsqd restarts, and so does consuming', async () => {
    const transport = new NsqTransport({ nsqd: [TCP], connectionBackoff: () => 100 });
    const queue = topicName('restart');
    const got: Delivery[] = [];
    await transport.consume(queue, (d) => {
      got.push(d);
      void d.ack();
    }, { prefetch: 5 });
    await transport.send(queue, { id: 'before', body: new Uint8Array(1), headers: {} });
    await until('the first message', () => got.length === 1);
    await stop();
    await boot();
    await until('a send after the restart', async () => transport.send(queue, { id: 'after', body: new Uint8Array(1), headers: {} }).then(() => true, () => false), 15_000);
    await until('the message sent after the restart', () => got.some((d) => d.id === 'after'), 15_000);
    await transport.close();
  }, 40_000);
});
