/**
 * A network of the fault suite's own: every member (a broker node, a group
 * of client processes) in a network namespace of its own, each joined by a
 * veth pair to a hub namespace that routes between them, so that a
 * partition can drop packets in transit, per direction and per pair of
 * members (see nemesis.ts), with iproute2 alone.
 *
 * Layout, for a network of subnet 10.213.S.0/24:
 * - hub `rdp-<pid>-<k>-hub`: forwards, answers ARP for every member (proxy
 *   ARP), holds a /32 route to each member through that member's veth;
 * - member `rdp-<pid>-<k>-<name>`: its end of the veth is `eth0` with
 *   10.213.S.(10 + i)/24 (the whole subnet on-link; the hub answers);
 * - the harness (this process, in the host's namespace) reaches members
 *   through one veth of its own, `rdp-<pid>-<k>` with 10.213.S.1/24, so it
 *   can watch the cluster and read the evidence; no partition cuts it.
 *
 * Nothing leaves the namespaces the network made, and only 10.213.0.0/16 is
 * used. `destroy()` removes every namespace and veth; {@link sweepNetworks}
 * removes what a run that died left behind (its pid is no longer alive).
 */
import { execFileSync } from 'node:child_process';
import { inNamespace, ip, ipQuietly } from './ip.js';

/** Every namespace and host-side veth the suite makes starts with this. */
export const NETWORK_PREFIX = 'rdp-';
const FIRST_MEMBER_HOST = 10;
const HUB_ADDRESS_HOST = 2;
const HARNESS_HOST = 1;

/** One member of the network. */
export interface Member {
  readonly name: string;
  /** Its network namespace. */
  readonly namespace: string;
  /** Its address on `eth0`. */
  readonly address: string;
  /** Its veth's end in the hub. */
  readonly hubInterface: string;
}

let networkCounter = 0;

/** A network of namespaces made by this process; build one with {@link FaultNetwork.create}. */
export class FaultNetwork {
  readonly #members = new Map<string, Member>();
  #destroyed = false;

  private constructor(
    /** Prefix of every name this network made: `rdp-<pid>-<k>`. */
    readonly tag: string,
    /** The first three octets of the network's /24, e.g. `10.213.7`. */
    readonly subnet: string,
    /** The hub namespace. */
    readonly hub: string,
  ) {}

  /**
   * Builds the hub, the harness's veth and one namespace per name in
   * `members` (names of letters and digits, at most 9 characters); removes
   * what it built when a step fails.
   */
  static create(members: readonly string[]): FaultNetwork {
    for (const name of members) {
      if (!/^[a-z0-9]{1,9}$/.test(name)) throw new Error(`FaultNetwork: member names are 1 to 9 lowercase letters or digits, got ${JSON.stringify(name)}`);
    }
    if (new Set(members).size !== members.length) throw new Error(`FaultNetwork: member names repeat: ${members.join(', ')}`);
    if (members.length > 200) throw new Error('FaultNetwork: at most 200 members');
    const tag = `${NETWORK_PREFIX}${process.pid}-${++networkCounter}`;
    const network = new FaultNetwork(tag, freeSubnet(), `${tag}-hub`);
    try {
      network.#build(members);
    } catch (error) {
      network.destroy();
      throw error;
    }
    return network;
  }

  /** The members, in the order they were named. */
  get members(): Member[] {
    return [...this.#members.values()];
  }

  /** Member `name`; throws naming the known ones when there is none. */
  member(name: string): Member {
    const member = this.#members.get(name);
    if (!member) throw new Error(`FaultNetwork: no member ${name} (members: ${[...this.#members.keys()].join(', ')})`);
    return member;
  }

  /** The harness's address (the host's end of its veth). */
  get harnessAddress(): string {
    return `${this.subnet}.${HARNESS_HOST}`;
  }

  /** The command line that runs `argv` inside member `name`'s namespace. */
  command(name: string, argv: readonly string[]): string[] {
    return inNamespace(this.member(name).namespace, argv);
  }

  /** Runs `argv` inside the hub, for its sysctls and routes; throws when it fails. */
  inHub(argv: readonly string[]): void {
    const [file, ...args] = inNamespace(this.hub, argv);
    execFileSync(file!, args, { stdio: 'ignore' });
  }

  /** Removes every namespace and veth of this network. Safe to call twice. */
  destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    for (const member of this.#members.values()) ipQuietly('netns', 'delete', member.namespace);
    ipQuietly('netns', 'delete', this.hub);
    // Deleting the hub deletes the peer, and with it this end; this covers a build that failed before the move.
    ipQuietly('link', 'delete', this.tag);
    untrack(this);
  }

  #build(names: readonly string[]): void {
    track(this);
    ip('netns', 'add', this.hub);
    ip('-n', this.hub, 'link', 'set', 'lo', 'up');
    // Forwarding between members, proxy ARP for every member on every port, no reverse-path filter on the hub's routed /32s.
    this.inHub([
      'sh',
      '-c',
      'echo 1 > /proc/sys/net/ipv4/ip_forward && echo 1 > /proc/sys/net/ipv4/conf/all/proxy_arp && echo 0 > /proc/sys/net/ipv4/conf/all/rp_filter && echo 0 > /proc/sys/net/ipv4/conf/default/rp_filter && echo 0 > /proc/sys/net/ipv4/conf/all/send_redirects',
    ]);
    ip('-n', this.hub, 'addr', 'add', `${this.subnet}.${HUB_ADDRESS_HOST}/32`, 'dev', 'lo');
    // The harness's veth: this end stays in the host's namespace, the other goes into the hub.
    ip('link', 'add', this.tag, 'type', 'veth', 'peer', 'name', 'h-harness', 'netns', this.hub);
    ip('addr', 'add', `${this.harnessAddress}/24`, 'dev', this.tag);
    ip('link', 'set', this.tag, 'up');
    this.#hubPort('h-harness', this.harnessAddress);
    names.forEach((name, i) => {
      const member: Member = { name, namespace: `${this.tag}-${name}`, address: `${this.subnet}.${FIRST_MEMBER_HOST + i}`, hubInterface: `h-${name}` };
      ip('netns', 'add', member.namespace);
      this.#members.set(name, member);
      ip('-n', member.namespace, 'link', 'set', 'lo', 'up');
      ip('-n', this.hub, 'link', 'add', member.hubInterface, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', member.namespace);
      ip('-n', member.namespace, 'addr', 'add', `${member.address}/24`, 'dev', 'eth0');
      ip('-n', member.namespace, 'link', 'set', 'eth0', 'up');
      this.#hubPort(member.hubInterface, member.address);
    });
  }

  /** Brings up a hub port and routes `address` through it. */
  #hubPort(port: string, address: string): void {
    ip('-n', this.hub, 'link', 'set', port, 'up');
    ip('-n', this.hub, 'route', 'add', `${address}/32`, 'dev', port);
  }
}

/**
 * Removes the namespaces and host-side veths named `rdp-<pid>-...` whose
 * process is gone (a run killed before it could clean up); leaves those of
 * live processes, this one's included. Resolves the names removed.
 */
export function sweepNetworks(): string[] {
  const removed: string[] = [];
  const dead = (name: string) => {
    const pid = Number(/^rdp-(\d+)-/.exec(name)?.[1]);
    return Number.isInteger(pid) && pid > 0 && pid !== process.pid && !alive(pid);
  };
  for (const ns of namespaces()) {
    if (!dead(ns)) continue;
    ipQuietly('netns', 'delete', ns);
    removed.push(ns);
  }
  for (const link of hostLinks()) {
    if (!dead(`${link}-`)) continue;
    ipQuietly('link', 'delete', link);
    removed.push(link);
  }
  return removed;
}

/** The namespaces named with the suite's prefix. */
export function namespaces(): string[] {
  return ip('netns', 'list')
    .split('\n')
    .map((line) => line.split(' ')[0]!)
    .filter((name) => name.startsWith(NETWORK_PREFIX));
}

/** The host's links named with the suite's prefix. */
export function hostLinks(): string[] {
  return ip('-o', 'link', 'show')
    .split('\n')
    .map((line) => /^\d+: ([^:@]+)/.exec(line)?.[1])
    .filter((name): name is string => name !== undefined && name.startsWith(NETWORK_PREFIX));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A /24 of 10.213.0.0/16 no address of the host's namespace is in, starting from one the pid picks. */
function freeSubnet(): string {
  const used = ip('-o', '-4', 'addr', 'show');
  for (let i = 0; i < 254; i++) {
    const octet = ((process.pid + networkCounter + i) % 254) + 1;
    if (!used.includes(` 10.213.${octet}.`)) return `10.213.${octet}`;
  }
  throw new Error('FaultNetwork: every /24 of 10.213.0.0/16 is in use on this host');
}

const live = new Set<FaultNetwork>();
let hooked = false;

/** Removes the network when this process exits or is interrupted, if it still exists. */
function track(network: FaultNetwork): void {
  live.add(network);
  if (hooked) return;
  hooked = true;
  process.on('exit', () => {
    for (const n of live) n.destroy();
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      for (const n of live) n.destroy();
      process.exit(130);
    });
  }
}

function untrack(network: FaultNetwork): void {
  live.delete(network);
}
