/**
 * NSQ in `npm run bench -- latency`: an NsqTransport, and nsqjs beside it
 * (a `Writer` that publishes, a `Reader` of max-in-flight P on the same
 * channel name that `FIN`s each message). Both on the shared nsqd.
 */
import nsq from 'nsqjs';
import { NsqTransport } from '../../src/transports/nsq/index.js';
import { within } from '../redis/workload.js';
import { readStamp, type BrokerCase, type CaseSettings, type Rig } from './rig.js';

const CHANNEL = 'redeliver';

export function nsqCase(settings: CaseSettings, tcp: string, http: string): BrokerCase {
  const topics = { bare: `bench-latency-${settings.token}-bare`, redeliver: `bench-latency-${settings.token}-rdl` };
  const [host, port] = tcp.split(':') as [string, string];
  return {
    name: 'nsq',
    bareName: 'nsqjs Reader + FIN',
    bare: async (onHandled): Promise<Rig> => {
      const writer = new nsq.Writer(host, Number(port), { clientId: 'bench-latency-bare' });
      const writerReady = new Promise<void>((resolve) => writer.once('ready', () => resolve()));
      writer.on('error', () => undefined);
      writer.connect();
      await within(writerReady, 10_000, 'nsqjs writer connect');
      // The topic and channel exist before the first send, as the transport makes them.
      await fetch(`http://${http}/topic/create?topic=${topics.bare}`, { method: 'POST' });
      await fetch(`http://${http}/channel/create?topic=${topics.bare}&channel=${CHANNEL}`, { method: 'POST' });
      const reader = new nsq.Reader(topics.bare, CHANNEL, { nsqdTCPAddresses: [tcp], maxInFlight: settings.prefetch, maxAttempts: 0, clientId: 'bench-latency-bare' });
      reader.on('message', (message) => {
        onHandled(readStamp(message.body), performance.now());
        message.finish();
      });
      reader.on('error', () => undefined);
      const connected = new Promise<void>((resolve) => reader.once('nsqd_connected', () => resolve()));
      reader.connect();
      await within(connected, 10_000, 'nsqjs reader connect');
      return {
        send: (body) => publish(writer, topics.bare, body),
        close: async () => {
          reader.close();
          writer.close();
        },
      };
    },
    transport: (side) => ({
      transport: new NsqTransport({ nsqd: [tcp], httpAddresses: { [tcp]: http }, channel: CHANNEL, connectionName: 'redeliver-bench-latency' }),
      queue: `${topics.redeliver}-${side}`,
    }),
    cleanup: async () => {
      // The run's topics, and any the transport made beside them (error topics).
      const stats = (await (await fetch(`http://${http}/stats?format=json`)).json()) as { topics?: { topic_name: string }[] };
      for (const { topic_name: topic } of stats.topics ?? []) {
        if (topic.includes(settings.token)) await fetch(`http://${http}/topic/delete?topic=${encodeURIComponent(topic)}`, { method: 'POST' });
      }
    },
  };
}

function publish(writer: nsq.Writer, topic: string, body: Buffer): Promise<void> {
  return new Promise((resolve, reject) => writer.publish(topic, body, (error?: Error) => (error ? reject(error) : resolve())));
}
