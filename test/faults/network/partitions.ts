/**
 * The partition kinds the fault suite runs, and seeded schedules of them. A
 * kind is said in roles (the work queue's leader node, its followers, the
 * clients' members on either side), resolved to members at the moment it
 * starts, and runs for a while before it heals. A schedule is a list of
 * kinds with their durations, drawn from a seed and printed as JSON, so a
 * run can be replayed from its seed (or from the printed schedule).
 */
import { seededRandom, type Random } from '../../../src/time/random.js';
import type { Nemesis } from './nemesis.js';

/** The kinds of partition. */
export const PARTITION_KINDS = [
  /** The leader cut off from every other node and client, both ways. */
  'isolate-leader',
  /** One follower cut off from everything, both ways. */
  'isolate-follower',
  /** What the leader sends is dropped; what it is sent still arrives. */
  'one-way-leader',
  /** The leader and the first client member on one side, the other two nodes and the other client members on the other. */
  'split-clients-minority',
  /** The leader's link slow and lossy, and cut and healed again and again. */
  'flapping-leader',
  /** The first client member (worker-1's) cut off from every node, both ways: long enough, its leases run out and its messages go to the other workers. */
  'client-past-lease',
] as const;

export type PartitionKind = (typeof PARTITION_KINDS)[number];

/** Who is who when a partition starts: member names. */
export interface PartitionRoles {
  /** The node leading the work queue. */
  readonly leader: string;
  /** The other nodes. */
  readonly followers: readonly string[];
  /** The members the producer and workers run in; the first is put on the minority side of a split. */
  readonly clients: readonly string[];
}

/** One step of a schedule: a kind, how long it lasts, and the pause after it heals. */
export interface PartitionStep {
  readonly kind: PartitionKind;
  readonly cutMs: number;
  readonly healedMs: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs `step` on `nemesis`: cuts, waits `cutMs` (flapping: cut and heal
 * in turns drawn from `random`), heals. Resolves a line saying what it did.
 */
export async function runPartition(nemesis: Nemesis, step: PartitionStep, roles: PartitionRoles, random: Random): Promise<string> {
  const { leader, followers, clients } = roles;
  const everyoneElse = [...followers, ...clients];
  try {
    switch (step.kind) {
      case 'isolate-leader':
        nemesis.cut([leader], everyoneElse);
        await sleep(step.cutMs);
        return `leader ${leader} isolated both ways for ${step.cutMs} ms`;
      case 'isolate-follower': {
        const follower = followers[Math.floor(random() * followers.length)]!;
        nemesis.cut([follower], [leader, ...followers.filter((f) => f !== follower), ...clients]);
        await sleep(step.cutMs);
        return `follower ${follower} isolated both ways for ${step.cutMs} ms`;
      }
      case 'one-way-leader':
        nemesis.drop([leader], everyoneElse);
        await sleep(step.cutMs);
        return `leader ${leader}'s packets to every other member dropped (it still hears them) for ${step.cutMs} ms`;
      case 'split-clients-minority': {
        const minority = [leader, ...clients.slice(0, 1)];
        nemesis.cut(minority, [...followers, ...clients.slice(1)]);
        await sleep(step.cutMs);
        return `split {${minority.join(' ')}} | {${[...followers, ...clients.slice(1)].join(' ')}} for ${step.cutMs} ms`;
      }
      case 'flapping-leader': {
        nemesis.slow(leader, true);
        let flaps = 0;
        const until = Date.now() + step.cutMs;
        while (Date.now() < until) {
          nemesis.cut([leader], everyoneElse);
          await sleep(Math.min(200 + random() * 1_300, Math.max(0, until - Date.now())));
          nemesis.healCuts();
          flaps++;
          await sleep(Math.min(200 + random() * 1_000, Math.max(0, until - Date.now())));
        }
        return `leader ${leader}'s link slow and lossy for ${step.cutMs} ms, cut and healed ${flaps} times`;
      }
      case 'client-past-lease': {
        const client = clients[0]!;
        nemesis.cut([client], [leader, ...followers]);
        await sleep(step.cutMs);
        return `client member ${client} cut from every node both ways for ${step.cutMs} ms`;
      }
    }
  } finally {
    nemesis.heal();
  }
}

/** `steps` partition steps drawn from `seed`: kinds in turn from a shuffled list, cuts of 3 to 6 s, 1 to 3 s healed between them. */
export function partitionSchedule(seed: number, steps: number): PartitionStep[] {
  const random = seededRandom(seed);
  const kinds = [...PARTITION_KINDS];
  for (let i = kinds.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [kinds[i], kinds[j]] = [kinds[j]!, kinds[i]!];
  }
  return Array.from({ length: steps }, (_, i) => ({
    kind: kinds[i % kinds.length]!,
    cutMs: 3_000 + Math.round(random() * 3_000),
    healedMs: 1_000 + Math.round(random() * 2_000),
  }));
}
