/**
 * The nemesis: cuts and heals a {@link FaultNetwork}. A cut is a
 * `blackhole` policy rule in the hub for one direction between two members
 * (`ip rule add from A to B blackhole`): packets from A to B are dropped in
 * transit, silently, as a broken link drops them; A learns nothing (no
 * reset, no ICMP) and its TCP retransmits until the cut heals. A slow link
 * is a token bucket (`tc tbf`) on both ends of a member's veth: packets
 * queue up to its latency, then drop.
 *
 * The harness's own veth is never cut: it watches the cluster from outside,
 * as a test's control node does.
 */
import { ip, tc } from './ip.js';
import type { FaultNetwork } from './network.js';

/** Priority of the nemesis's rules: before the main table's (32766). */
const RULE_PREF = '100';
/** The slow link: 1 Mbit/s, 16 KiB burst, packets queued up to 100 ms, then dropped. */
const SLOW_LINK = ['rate', '1mbit', 'burst', '16kb', 'latency', '100ms'];

export class Nemesis {
  /** Directions cut now, as `from>to` member names. */
  readonly #cuts = new Set<string>();
  /** Members whose link is slow now. */
  readonly #slow = new Set<string>();

  constructor(
    readonly network: FaultNetwork,
    private readonly log: (line: string) => void = () => undefined,
  ) {}

  /** Drops every packet from each member of `from` to each member of `to` (one way; already-cut directions stay cut). */
  drop(from: readonly string[], to: readonly string[]): void {
    this.log(`nemesis: drop {${from.join(' ')}} -> {${to.join(' ')}}`);
    for (const a of from) {
      for (const b of to) {
        if (a === b || this.#cuts.has(`${a}>${b}`)) continue;
        ip('-n', this.network.hub, 'rule', 'add', ...this.#selector(a, b), 'blackhole', 'pref', RULE_PREF);
        this.#cuts.add(`${a}>${b}`);
      }
    }
  }

  /** Cuts both ways between every member of `a` and every member of `b`. */
  cut(a: readonly string[], b: readonly string[]): void {
    this.drop(a, b);
    this.drop(b, a);
  }

  /** Cuts `name` off from every other member, both ways. */
  isolate(name: string): void {
    this.cut([name], this.#others(name));
  }

  /** Makes `name`'s link slow and lossy (both directions) or normal again. */
  slow(name: string, on: boolean): void {
    const member = this.network.member(name);
    if (on === this.#slow.has(name)) return;
    this.log(`nemesis: ${name}'s link ${on ? 'slow and lossy' : 'normal'}`);
    for (const [ns, dev] of [
      [this.network.hub, member.hubInterface],
      [member.namespace, 'eth0'],
    ] as const) {
      if (on) tc('-n', ns, 'qdisc', 'add', 'dev', dev, 'root', 'tbf', ...SLOW_LINK);
      else tc('-n', ns, 'qdisc', 'del', 'dev', dev, 'root');
    }
    if (on) this.#slow.add(name);
    else this.#slow.delete(name);
  }

  /** Directions cut now (`from>to`). */
  get cuts(): string[] {
    return [...this.#cuts];
  }

  /** Removes every cut and slow link. */
  heal(): void {
    if (this.#cuts.size > 0 || this.#slow.size > 0) this.log('nemesis: heal');
    this.healCuts();
    for (const name of this.#slow) this.slow(name, false);
  }

  /** Removes every cut, leaving slow links slow. */
  healCuts(): void {
    for (const cut of this.#cuts) {
      const [a, b] = cut.split('>') as [string, string];
      ip('-n', this.network.hub, 'rule', 'del', ...this.#selector(a, b), 'blackhole', 'pref', RULE_PREF);
      this.#cuts.delete(cut);
    }
  }

  #selector(from: string, to: string): string[] {
    return ['from', `${this.network.member(from).address}/32`, 'to', `${this.network.member(to).address}/32`];
  }

  #others(name: string): string[] {
    this.network.member(name);
    return this.network.members.map((m) => m.name).filter((n) => n !== name);
  }
}
