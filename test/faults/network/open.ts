/**
 * A cluster adapter's network at start: the networks of dead runs swept
 * away, then a fresh one of the adapter's members with its nemesis.
 */
import { Nemesis } from './nemesis.js';
import { FaultNetwork, sweepNetworks } from './network.js';

/** Sweeps dead runs' networks, builds one of `members` and its nemesis, and logs both steps. */
export function openNetwork(members: readonly string[], log: (line: string) => void): { network: FaultNetwork; nemesis: Nemesis } {
  const swept = sweepNetworks();
  if (swept.length > 0) log(`removed a dead run's network: ${swept.join(' ')}`);
  const network = FaultNetwork.create(members);
  log(`network ${network.tag}: ${network.members.map((m) => `${m.name} ${m.address}`).join(', ')}`);
  return { network, nemesis: new Nemesis(network, log) };
}
