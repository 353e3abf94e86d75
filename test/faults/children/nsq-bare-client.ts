/**
 * What the bare NSQ children share: a publisher over nsqjs's Writer that
 * opens a new connection after nsqd closes one (the Writer never reconnects
 * by itself), and the number in a message id `m-<i>`.
 */
import nsq from 'nsqjs';

/** A publisher to one nsqd. */
export interface BareWriter {
  /** Publishes `body` to `topic`; resolves once nsqd answered OK, rejects when it did not (or the connection is down). */
  publish(topic: string, body: string): Promise<void>;
  close(): void;
}

/** A publisher to the nsqd at `address` (`host:port`), connecting again 200 ms after each close. */
export function bareWriter(address: string, clientId: string): BareWriter {
  const [host, port] = address.split(':');
  let closed = false;
  let ready: Promise<nsq.Writer>;
  const open = () => {
    ready = new Promise((resolve) => {
      const writer = new nsq.Writer(host!, Number(port), { clientId });
      writer.on('ready', () => resolve(writer));
      writer.on('error', () => undefined);
      writer.on('closed', () => {
        if (!closed) setTimeout(open, 200);
      });
      writer.connect();
    });
  };
  open();
  return {
    async publish(topic, body) {
      const writer = await Promise.race([ready, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no connection to nsqd')), 5_000))]);
      await new Promise<void>((resolve, reject) => writer.publish(topic, body, (error) => (error ? reject(error) : resolve())));
    },
    close() {
      closed = true;
      void ready.then((writer) => writer.close());
    },
  };
}

/** The `i` of a message id `m-<i>`. */
export function idNumber(id: string): number {
  return Number(id.slice(2));
}
