/**
 * What `npm run bench -- rocketmq` reads off the broker: its timer
 * precision (`timerPrecisionMs`, from `GET_BROKER_CONFIG` over the
 * remoting protocol), and its run's topics and groups, made and deleted
 * with the transport's admin.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { RocketMqAdmin } from '../../src/transports/rocketmq/index.js';
import { request } from '../../src/transports/rocketmq/remoting.js';

/** The broker's request for its whole configuration, as Java properties. */
const GET_BROKER_CONFIG = 26;

/** The timer precision of every master of the cluster, ms (RocketMQ's default is 1 000). */
export async function timerPrecisionMs(admin: RocketMqAdmin): Promise<number[]> {
  const out: number[] = [];
  for (const broker of await admin.masters()) {
    const reply = await request(broker, GET_BROKER_CONFIG, {});
    const match = /^timerPrecisionMs=(\d+)$/m.exec(reply.body.toString('utf8'));
    if (!match) throw new Error(`broker ${broker} did not report timerPrecisionMs`);
    out.push(Number(match[1]));
  }
  return out;
}

/** The bytes of a broker's timer files under its store: the wheel (`timerwheel`, one slot per tick) and the log (`timerlog/`). */
export function timerFileBytes(store: string): { wheel: number; log: number } {
  const wheelPath = join(store, 'timerwheel');
  const logDir = join(store, 'timerlog');
  const wheel = existsSync(wheelPath) ? statSync(wheelPath).size : 0;
  const log = existsSync(logDir) ? readdirSync(logDir).reduce((sum, file) => sum + statSync(join(logDir, file)).size, 0) : 0;
  return { wheel, log };
}
