import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HEADER } from '../../src/headers/names.js';
import type { Headers, Transport } from '../../src/transport/types.js';

/** A new folder for store and transport files. */
export function scratchDir(): string {
  return mkdtempSync(join(tmpdir(), 'redeliver-store-'));
}

/** The failure headers a dead-lettering endpoint writes, for one failure. */
export function failureHeaders(failure: { errorName?: string; message: string; queue?: string; at?: string; replayCount?: number; endpoint?: string }): Headers {
  return {
    [HEADER.failureReason]: 'retries-exhausted',
    [HEADER.failureErrorName]: failure.errorName ?? 'Error',
    [HEADER.failureMessage]: failure.message,
    [HEADER.failureStack]: `${failure.errorName ?? 'Error'}: ${failure.message}\n    at handle (/app/handler.js:10:5)`,
    [HEADER.failureTime]: failure.at ?? new Date().toISOString(),
    [HEADER.failureQueue]: failure.queue ?? 'orders',
    [HEADER.failureEndpoint]: failure.endpoint ?? 'orders-endpoint',
    [HEADER.failureHost]: 'host-1',
    ...(failure.replayCount === undefined ? {} : { [HEADER.replayCount]: String(failure.replayCount) }),
  };
}

/**
 * Puts messages into `errorQueue` the way an endpoint does: each is sent to
 * `workQueue`, consumed and dead-lettered with its failure headers.
 */
export async function deadLetter(
  transport: Transport,
  workQueue: string,
  errorQueue: string,
  messages: readonly { id: string; body?: string; headers: Headers }[],
): Promise<void> {
  const byId = new Map(messages.map((m) => [m.id, m]));
  for (const m of messages) await transport.send(workQueue, { id: m.id, body: Buffer.from(m.body ?? `{"id":"${m.id}"}`), headers: {} });
  let left = messages.length;
  await new Promise<void>((resolve, reject) => {
    let subscription: Awaited<ReturnType<Transport['consume']>> | undefined;
    transport
      .consume(
        workQueue,
        (delivery) => {
          const m = byId.get(delivery.id)!;
          delivery.deadLetter(errorQueue, { ...delivery.headers, ...m.headers }).then(() => {
            if (--left === 0) void subscription!.close().then(resolve, reject);
          }, reject);
        },
        { prefetch: 50 },
      )
      .then((s) => {
        subscription = s;
        if (left === 0) void s.close().then(resolve, reject);
      }, reject);
  });
}
