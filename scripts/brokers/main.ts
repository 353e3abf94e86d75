/**
 * `npm run brokers -- up|down|status [--json] [rabbitmq|redis|nats|nsq|rocketmq ...]`
 *
 * Installs what is missing and starts every broker the tests use, on
 * loopback, on a bare machine; stops them; or tells their state. Every
 * broker by default. `up` is idempotent (instant when all run), says what it
 * does, and when one broker cannot be installed or started it names it and
 * its log, leaves the others running and exits 1. `up` also installs
 * Debian's Chromium for the dashboard's browser tests.
 */
import type { Broker, BrokerStatus } from './broker.js';
import { nats } from './nats.js';
import { nsq } from './nsq.js';
import { rabbitmq } from './rabbitmq.js';
import { redis } from './redis.js';
import { rocketmq } from './rocketmq.js';
import { aptInstall, debVersion, upstreamVersion } from './system.js';

const BROKERS: readonly Broker[] = [rabbitmq, redis, nats, nsq, rocketmq];
/** Debian packages the tests need beside the brokers: the browser the dashboard's tests drive, and iproute2 for the fault suite's network of namespaces. */
const TOOLS = ['chromium', 'iproute2'];
const USAGE = `usage: npm run brokers -- up|down|status [--json] [${BROKERS.map((b) => b.name).join('|')} ...]`;

const args = process.argv.slice(2);
const command = args[0];
const json = args.includes('--json');
const names = args.slice(1).filter((a) => a !== '--json');
const unknown = names.filter((n) => !BROKERS.some((b) => b.name === n));
if (!command || !['up', 'down', 'status'].includes(command) || unknown.length > 0) {
  console.error(unknown.length > 0 ? `brokers: unknown broker ${unknown.join(', ')}\n${USAGE}` : USAGE);
  process.exit(2);
}
const chosen = names.length === 0 ? BROKERS : BROKERS.filter((b) => names.includes(b.name));
const say = (broker: string) => (line: string) => console.log(`brokers: ${broker}: ${line}`);
const seconds = (since: number) => `${((Date.now() - since) / 1000).toFixed(1)} s`;

/** Installs and starts each chosen broker (Debian packages first, in one apt run); resolves the names that failed. */
async function up(): Promise<string[]> {
  const started = Date.now();
  const debian = [...new Set([...chosen.flatMap((b) => b.debianPackages ?? []), ...(names.length === 0 ? TOOLS : [])])];
  const failed: string[] = [];
  try {
    const installed = await aptInstall(debian, say('apt'));
    if (installed.length > 0) say('apt')(`installed ${installed.join(', ')} and their dependencies in ${seconds(started)}`);
  } catch (error) {
    console.error(`brokers: could not install Debian packages (${debian.join(', ')}): ${(error as Error).message}`);
  }
  await Promise.all(
    chosen.map(async (broker) => {
      const since = Date.now();
      try {
        await broker.install(say(broker.name));
        await broker.start(say(broker.name));
        console.log(`brokers: ${broker.name}: up (${seconds(since)})`);
      } catch (error) {
        failed.push(broker.name);
        console.error(`brokers: ${broker.name} FAILED: ${(error as Error).message.split('\n')[0]} (log: ${broker.logFile})`);
        const detail = (error as Error).message.split('\n').slice(1).join('\n');
        if (detail) console.error(detail);
      }
    }),
  );
  console.log(`brokers: up in ${seconds(started)}${failed.length > 0 ? `; failed: ${failed.join(', ')}` : ''}`);
  return failed;
}

async function down(): Promise<void> {
  await Promise.all(chosen.map((broker) => broker.stop(say(broker.name))));
}

async function status(): Promise<boolean> {
  const rows = await Promise.all(chosen.map(async (b) => [b.name, await b.status()] as const));
  const chromium = await debVersion('chromium');
  if (json) {
    console.log(JSON.stringify({ ...Object.fromEntries(rows), chromium: { installed: chromium !== null, version: chromium && upstreamVersion(chromium) } }));
  } else {
    for (const [name, s] of rows) console.log(formatStatus(name, s));
    console.log(`${'chromium'.padEnd(9)} ${chromium ? `installed ${upstreamVersion(chromium)}` : 'not installed'}`);
  }
  return rows.every(([, s]) => s.up);
}

function formatStatus(name: string, s: BrokerStatus): string {
  const ports = Object.entries(s.ports)
    .map(([role, port]) => `${role} ${port}`)
    .join(', ');
  return `${name.padEnd(9)} ${(s.up ? 'up' : 'down').padEnd(5)} ${(s.version ?? 'not installed').padEnd(14)} pid ${String(s.pid ?? '-').padEnd(8)} ${ports}`;
}

if (command === 'up') process.exitCode = (await up()).length > 0 ? 1 : 0;
else if (command === 'down') await down();
else process.exitCode = (await status()) ? 0 : 3;
