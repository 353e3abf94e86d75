/**
 * Reading a durable pull consumer with one handler call per message, the
 * calls running side by side (a handler that awaits the server must not
 * hold up the next message).
 */
import type { JetStreamClient, JsMsg } from '@nats-io/jetstream';

/** A running read; `stop` ends it and rejects with the first handler error, if any. */
export interface Reading {
  stop(): Promise<void>;
}

/** Reads `durable` on `stream`, `prefetch` messages per pull, calling `handle` for each. */
export async function consumeEach(js: JetStreamClient, stream: string, durable: string, prefetch: number, handle: (message: JsMsg) => Promise<void>): Promise<Reading> {
  const consumer = await js.consumers.get(stream, durable);
  const messages = await consumer.consume({ max_messages: prefetch });
  const running = new Set<Promise<void>>();
  const errors: unknown[] = [];
  const loop = (async () => {
    for await (const message of messages) {
      const call = handle(message).catch((error: unknown) => void errors.push(error));
      running.add(call);
      void call.finally(() => running.delete(call));
    }
  })();
  return {
    async stop() {
      await messages.close();
      await loop;
      await Promise.all(running);
      if (errors.length > 0) throw new Error(`${stream}/${durable}: ${errors.length} handler errors; first: ${String(errors[0])}`);
    },
  };
}
