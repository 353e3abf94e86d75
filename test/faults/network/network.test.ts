/**
 * The fault suite's network, tested on itself: members reach each other and
 * the harness; a cut stops a TCP connect and an established connection
 * (and only in the directions cut); healing restores both; a slow link still
 * carries traffic; destroying the network and the sweep leave nothing.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createConnection, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { networkUnavailableReason } from './ip.js';
import { Nemesis } from './nemesis.js';
import { FaultNetwork, hostLinks, namespaces, sweepNetworks } from './network.js';

const unavailable = networkUnavailableReason();
if (unavailable && process.env['CI'] === 'true') throw new Error(`${unavailable}, and CI=true: the partition tests must run in CI`);
if (unavailable) console.warn(`\n!!! SKIPPING the fault suite's network tests: ${unavailable}. !!!\n`);

const PORT = 7000;
/** An echo server on every address of the namespace it runs in. */
const ECHO = `require('net').createServer((s) => s.on('error', () => {}).pipe(s)).listen(${PORT}, () => console.log('listening'))`;
/** A UDP listener printing each datagram it gets. */
const UDP = `const s = require('dgram').createSocket('udp4'); s.on('message', (m) => console.log('got ' + m)); s.bind(${PORT}, () => console.log('listening'))`;

/** Tries a TCP connect from member `from` to `address`: 'open', 'refused' or 'timeout' (nothing came back in 1.5 s). */
function connectFrom(network: FaultNetwork, from: string, address: string): 'open' | 'refused' | 'timeout' {
  const [file, ...args] = network.command(from, ['timeout', '1.5', 'bash', '-c', `echo > /dev/tcp/${address}/${PORT}`]);
  const { status } = spawnSync(file!, args, { stdio: 'ignore' });
  return status === 0 ? 'open' : status === 124 ? 'timeout' : 'refused';
}

/** Sends one UDP datagram from member `from` to `address`. */
function udpFrom(network: FaultNetwork, from: string, address: string, text: string): void {
  const [file, ...args] = network.command(from, ['bash', '-c', `echo ${text} > /dev/udp/${address}/${PORT}`]);
  spawnSync(file!, args, { stdio: 'ignore' });
}

/** Starts `node -e script` inside member `name`; resolves once it prints 'listening', with a view of its output. */
async function startIn(network: FaultNetwork, name: string, script: string): Promise<{ child: ChildProcess; output: () => string }> {
  const [file, ...args] = network.command(name, [process.execPath, '-e', script]);
  const child = spawn(file!, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await until(() => output.includes('listening'), 10_000);
  return { child, output: () => output };
}

async function until(check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.skipIf(unavailable)("the fault suite's network", () => {
  let network: FaultNetwork;
  let nemesis: Nemesis;
  const servers: ChildProcess[] = [];

  beforeAll(async () => {
    sweepNetworks();
    network = FaultNetwork.create(['a', 'b', 'c']);
    nemesis = new Nemesis(network);
    for (const name of ['b', 'c']) servers.push((await startIn(network, name, ECHO)).child);
  }, 30_000);

  afterAll(() => {
    nemesis?.heal();
    for (const server of servers) server.kill('SIGKILL');
    network?.destroy();
  });

  const addr = (name: string) => network.member(name).address;

  it('connects every member to every other and to the harness', async () => {
    expect(connectFrom(network, 'a', addr('b'))).toBe('open');
    expect(connectFrom(network, 'a', addr('c'))).toBe('open');
    expect(connectFrom(network, 'b', addr('c'))).toBe('open');
    // Nothing listens on a's port: refused, so the packets got there and back.
    expect(connectFrom(network, 'b', addr('a'))).toBe('refused');
    const socket = createConnection({ host: addr('b'), port: PORT });
    await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    socket.destroy();
  });

  it('isolates a member both ways, and only that member, until healed', () => {
    nemesis.isolate('b');
    try {
      expect(connectFrom(network, 'a', addr('b'))).toBe('timeout');
      expect(connectFrom(network, 'c', addr('b'))).toBe('timeout');
      expect(connectFrom(network, 'b', addr('c'))).toBe('timeout');
      expect(connectFrom(network, 'a', addr('c'))).toBe('open');
    } finally {
      nemesis.heal();
    }
    expect(nemesis.cuts).toEqual([]);
    expect(connectFrom(network, 'a', addr('b'))).toBe('open');
    expect(connectFrom(network, 'b', addr('c'))).toBe('open');
  });

  it('drops one direction only: b hears a, a does not hear b', async () => {
    const listeners = [await startIn(network, 'a', UDP), await startIn(network, 'b', UDP)];
    try {
      nemesis.drop(['b'], ['a']);
      udpFrom(network, 'a', addr('b'), 'a-to-b');
      udpFrom(network, 'b', addr('a'), 'b-to-a');
      await until(() => listeners[1]!.output().includes('got a-to-b'), 5_000);
      await new Promise((r) => setTimeout(r, 500));
      expect(listeners[0]!.output()).not.toContain('b-to-a');
      nemesis.heal();
      udpFrom(network, 'b', addr('a'), 'b-to-a-healed');
      await until(() => listeners[0]!.output().includes('got b-to-a-healed'), 5_000);
    } finally {
      nemesis.heal();
      for (const { child } of listeners) child.kill('SIGKILL');
    }
  });

  it('holds an established connection through a cut and delivers what was sent during it once healed', async () => {
    const [file, ...args] = network.command('a', [
      process.execPath,
      '-e',
      `const s = require('net').connect(${PORT}, '${addr('c')}', () => console.log('listening')); s.on('data', (d) => console.log('echo ' + d)); process.stdin.on('data', (d) => s.write(d))`,
    ]);
    const client = spawn(file!, args, { stdio: ['pipe', 'pipe', 'inherit'] });
    let output = '';
    client.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    try {
      await until(() => output.includes('listening'), 10_000);
      client.stdin!.write('before');
      await until(() => output.includes('echo before'), 5_000);
      nemesis.cut(['a'], ['c']);
      client.stdin!.write('during');
      await new Promise((r) => setTimeout(r, 1_500));
      expect(output).not.toContain('during');
      nemesis.heal();
      // TCP retransmits; the first retry after 1.5 s of silence comes within a few seconds.
      await until(() => output.includes('echo during'), 15_000);
    } finally {
      nemesis.heal();
      client.kill('SIGKILL');
    }
  }, 30_000);

  it('keeps a slow link carrying traffic, and makes it normal again', async () => {
    nemesis.slow('c', true);
    try {
      const socket: Socket = createConnection({ host: addr('c'), port: PORT });
      await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
      let echoed = 0;
      socket.on('data', (d: Buffer) => (echoed += d.length));
      const payload = Buffer.alloc(256 * 1024, 1);
      const started = Date.now();
      socket.write(payload);
      await until(() => echoed >= payload.length, 20_000);
      // 256 KiB each way at 1 Mbit/s: about two seconds at least.
      expect(Date.now() - started).toBeGreaterThan(1_500);
      socket.destroy();
    } finally {
      nemesis.slow('c', false);
    }
    expect(connectFrom(network, 'a', addr('c'))).toBe('open');
  }, 30_000);

  it('leaves no namespace or host veth behind when destroyed, and the sweep removes a dead run\'s', () => {
    const other = FaultNetwork.create(['x']);
    const made = namespaces().filter((ns) => ns.startsWith(other.tag));
    expect(made.sort()).toEqual([`${other.tag}-hub`, `${other.tag}-x`]);
    expect(hostLinks()).toContain(other.tag);
    other.destroy();
    expect(namespaces().filter((ns) => ns.startsWith(other.tag))).toEqual([]);
    expect(hostLinks()).not.toContain(other.tag);
    // A run that died: its pid no longer exists.
    const dead = spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], { encoding: 'utf8' }).stdout.trim();
    spawnSync('ip', ['netns', 'add', `rdp-${dead}-1-hub`]);
    expect(sweepNetworks()).toContain(`rdp-${dead}-1-hub`);
    expect(namespaces()).not.toContain(`rdp-${dead}-1-hub`);
    // This run's network is live: the sweep leaves it.
    expect(namespaces()).toContain(network.hub);
  });
});
