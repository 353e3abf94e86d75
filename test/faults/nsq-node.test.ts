/**
 * NsqNodes placed in the fault suite's network namespaces: nsqlookupd and
 * each nsqd listen on their own member's address, nsqd registers that
 * address with nsqlookupd (so consumers elsewhere in the network find it),
 * and a kill and boot work through the namespace's command line. Without a
 * placement the shared nsqd's ports stay refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NsqNodes, nsqNodeSkipReason } from '../support/nsq-node.js';
import { portOpen } from '../support/rabbit-node.js';
import { networkUnavailableReason } from './network/ip.js';
import { FaultNetwork } from './network/network.js';

const unavailable = networkUnavailableReason();
if (unavailable && process.env['CI'] === 'true') throw new Error(`${unavailable}, and CI=true: the partition tests must run in CI`);
const skip = Boolean(unavailable) || Boolean(nsqNodeSkipReason());

describe('NsqNodes without a placement', () => {
  it('refuses the shared nsqd/nsqlookupd ports', async () => {
    await expect(NsqNodes.start({ basePort: 4148, nodes: 1 })).rejects.toThrow(/4150, 4151 belong to the shared/);
  });
});

describe.skipIf(skip)('NsqNodes placed in network namespaces', () => {
  let network: FaultNetwork;
  let nodes: NsqNodes;

  beforeAll(async () => {
    network = FaultNetwork.create(['n1', 'n2', 'n3']);
    nodes = await NsqNodes.start({
      // The shared ports, on addresses of the namespaces' own: no clash with the shared nsqd on 127.0.0.1.
      basePort: 4150,
      nodes: 2,
      placement: (node) => {
        const member = node === 'lookupd' ? 'n3' : `n${node}`;
        return { host: network.member(member).address, command: (argv) => network.command(member, argv) };
      },
    });
  }, 60_000);

  afterAll(async () => {
    await nodes?.stop();
    network?.destroy();
  });

  it('listens on each member address and registers nsqd there with nsqlookupd', async () => {
    expect(nodes.tcpAddress(1)).toBe(`${network.member('n1').address}:4152`);
    expect(nodes.httpAddress(2)).toBe(`${network.member('n2').address}:4155`);
    expect(nodes.lookupdHttpAddress).toBe(`${network.member('n3').address}:4151`);
    // A topic on each nsqd: nsqlookupd lists both for it, at the address each broadcasts, as consumers look them up.
    for (const node of nodes.nodes) await nodes.post(node, '/topic/create?topic=placed');
    let listed: string[] = [];
    for (let i = 0; i < 100 && listed.length < 2; i++) {
      const answer = (await (await fetch(`http://${nodes.lookupdHttpAddress}/lookup?topic=placed`)).json()) as { producers?: { broadcast_address: string; tcp_port: number }[] };
      listed = (answer.producers ?? []).map((p) => `${p.broadcast_address}:${p.tcp_port}`).sort();
      if (listed.length < 2) await new Promise((r) => setTimeout(r, 100));
    }
    expect(listed).toEqual([nodes.tcpAddress(1), nodes.tcpAddress(2)].sort());
  });

  it('kills and boots an nsqd inside its namespace', async () => {
    const [host, port] = nodes.tcpAddress(2).split(':');
    await nodes.kill(2);
    expect(await portOpen(Number(port), host)).toBe(false);
    await nodes.boot(2);
    expect(await portOpen(Number(port), host)).toBe(true);
    await expect(nodes.get(2, '/stats?format=json')).resolves.toMatchObject({ version: expect.any(String) });
  }, 60_000);
});
