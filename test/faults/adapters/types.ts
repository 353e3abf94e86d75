/**
 * The per-transport part of the fault suite: how to start, kill and restart
 * a transport's broker, how to describe its transport to a child process,
 * and how to read the durable evidence it holds (error-queue entries,
 * pending messages). Faults a transport cannot have are left out, with the
 * reason in {@link FaultAdapter.skipReason}.
 */
import type { Nemesis } from '../network/nemesis.js';
import type { PartitionRoles } from '../network/partitions.js';
import type { TransportSpec } from '../transport-spec.js';

/** The names a scenario uses, unique per scenario run. */
export interface ScopeNames {
  /** The scenario's label, also the prefix of every connection name. */
  readonly label: string;
  readonly queue: string;
  readonly errorQueue: string;
}

/** One scenario's view of a transport. */
export interface Scope extends ScopeNames {
  /**
   * The transport spec for a process whose connection is named
   * `<label>-<role>`; `node` picks the broker node a producer sends to, where
   * the scope has several (default: the scope's own choice).
   */
  spec(role: string, node?: number): TransportSpec;
  /**
   * The command line that runs a child process of `role` (`worker-1`,
   * `producer-2`) where the scope places it, e.g. inside a network
   * namespace. Default: on the host, as is.
   */
  place?(role: string, argv: readonly string[]): string[];
  /** The child scripts this scope's processes run, when not the redeliver worker and producer (the bare broker client's). */
  readonly children?: { readonly worker: string; readonly producer: string };
  /** The target the `redeliver` CLI takes (a file path, an AMQP or a Redis URL). */
  readonly cliTarget: string;
  /** Environment the `redeliver` CLI needs besides its target (e.g. the Redis key prefix). Default none. */
  readonly cliEnv?: Readonly<Record<string, string>>;
  /** Entries in the error queue now (0 when it does not exist). */
  errorCount(): Promise<number>;
  /** Messages waiting for a delayed retry now; cheap, for polling (on RabbitMQ, ready copies only). */
  delayedCount(): Promise<number>;
  /**
   * Messages waiting for a delayed retry now, every one counted: on RabbitMQ
   * also a copy mid-hop between two quorum delay levels, which
   * `delayedCount` misses, read in one pass in the order copies move so that
   * none slips past. Slower. Default: `delayedCount`.
   */
  delayedCountExact?(): Promise<number>;
  /**
   * Copies the transport set aside for an operator, by design (RabbitMQ: the
   * unroutable queue, holding delayed copies whose work queue was deleted
   * while they waited). Counted as pending at the end. Default 0.
   */
  parkedCount?(): Promise<number>;
  /**
   * Message ids in the error queue, read the way an operator reads it: ingested into an
   * error store under the scope's directory (see error-ids.ts), or on RocketMQ, whose
   * error topics are read in place without consuming them, listed as `errors list` reads
   * them. Read once every worker has stopped.
   */
  errorIds(): Promise<string[]>;
  /**
   * Message ids in the error queue now, read without consuming or moving
   * anything, while workers run; where the broker allows such a read
   * (RocketMQ: the same in-place read as `errorIds`). The drain checks the
   * ids still open against them: an error queue can hold one message twice
   * (a dead-letter whose original was given out again), and a count of
   * entries would take the second entry for a message still on its way.
   * Default: absent (the drain compares the open ids with `errorCount`).
   */
  errorIdsNow?(): Promise<string[]>;
  /** Message ids still in the work queue or a delay, read once every worker has stopped; may consume them. */
  pendingIds(): Promise<string[]>;
  /**
   * Where the broker can hold copies it will not send on by itself, does
   * what an operator would to move them on, and says what it did; undefined
   * when it found none held. The drain calls it after a minute without
   * progress. Default: absent (RabbitMQ 3.10 clusters have it: a quorum
   * delay level whose dead-letter worker stopped after its target's leader
   * changed).
   */
  unstick?(): Promise<string | undefined>;
  /** Removes what the scenario left on the broker. */
  cleanup(): Promise<void>;
}

/** Options of {@link FaultAdapter.scope}. */
export interface ScopeOptions {
  /** Declare the error queue first with this `x-max-length` and `x-overflow: reject-publish`. Default none. */
  readonly errorQueueMaxLength?: number;
  /** Consumers find the broker's nodes through its discovery service (NSQ: nsqlookupd) instead of an address. Default false. */
  readonly discovery?: boolean;
}

/** A cluster on a network of the suite's own, which partition scenarios cut apart. */
export interface Partitionable {
  readonly nemesis: Nemesis;
  /** Who leads the scope's work queue now, the other nodes, and the members its clients run in. */
  roles(scope: Scope): Promise<PartitionRoles>;
}

/** An adapter's {@link Partitionable} from its nemesis, or undefined while it has none (no network of its own, or not started). */
export function partitionable(nemesis: Nemesis | undefined, roles: Partitionable['roles']): Partitionable | undefined {
  return nemesis ? { nemesis, roles } : undefined;
}

/** What the fault suite needs of one transport. */
export interface FaultAdapter {
  /** The transport's name in the report, e.g. `sqlite`, `rabbitmq`. */
  readonly transport: string;
  /** Why `scenario` does not apply to this transport, or undefined when it does. */
  skipReason(scenario: string): string | undefined;
  /**
   * How long the drain waits with nothing handled or dead-lettered before it
   * counts as stalled. Default the run's (200 s, past RabbitMQ's 180 s hop
   * retry).
   */
  readonly stallMs?: number;
  /**
   * The lease a worker's delivery has when its endpoint asks for the
   * suite's 2 s (WORKER_LEASE_MS in context.ts): a transport may raise it
   * (RocketMQ to the proxy's shortest invisible duration, 10 s). The
   * one-holder check and the client-past-lease cut go by it. Default 2 s.
   */
  readonly leaseMs?: number;
  /**
   * How long a worker may take from its start until it consumes (its
   * topology declared); past it the scenario stops early. Default 60 s.
   */
  readonly workerStartMs?: number;
  /**
   * A scope for the broker's bare client, run beside redeliver in the same
   * scenario (same faults, same failure mix) where the broker itself loses
   * messages by design; its loss is reported as `bareLost`. Undefined for
   * other scenarios.
   */
  bareScope?(scenario: string, label: string, dir: string): Promise<Scope | undefined>;
  /** Starts the broker, if the transport has one. */
  start(): Promise<void>;
  /** Stops the broker and removes its files. */
  stop(): Promise<void>;
  /** A fresh scope for one scenario, its files under `dir`. */
  scope(label: string, dir: string, options?: ScopeOptions): Promise<Scope>;
  /** Kills the broker with SIGKILL and starts it again; absent when the store lives in the worker's process. */
  killBroker?(scope: Scope): Promise<void>;
  /** Stops the broker gracefully and starts it again; absent when the store lives in the worker's process. */
  restartBroker?(scope: Scope): Promise<void>;
  /** Freezes the broker (SIGSTOP) for `ms`, connections open, then lets it run again (SIGCONT). */
  stallBroker?(ms: number): Promise<void>;
  /** Cuts the connections of this scope's processes from the broker's side. */
  cutConnections?(scope: Scope): Promise<number>;
  /** Raises or clears a broker memory alarm. */
  memoryAlarm?(on: boolean): Promise<void>;
  /**
   * Makes the broker refuse the copies settlements write (`true`) or take
   * them again (`false`): on RabbitMQ the error queue's copies, on Redis and
   * JetStream every write of a copy.
   */
  refuseSettlements?(scope: Scope, on: boolean): Promise<void>;
  /** Deletes a queue if it holds no message; resolves whether it did. */
  deleteQueueIfEmpty?(queue: string): Promise<boolean>;
  /** Ready messages in a queue (0 when it does not exist). */
  readyCount?(queue: string): Promise<number>;
  /** The cluster's network and nemesis, where the adapter runs its nodes and clients in network namespaces. */
  readonly partitions?: Partitionable;
  /** Kills broker node `node` with SIGKILL; resolves a function that brings it back (brokers of several independent nodes). */
  killNode?(node: number): Promise<() => Promise<void>>;
  /** Kills the node leading the work queue with SIGKILL; resolves a function that brings it back. */
  killQueueLeader?(scope: Scope): Promise<() => Promise<void>>;
  /** Kills the name server (RocketMQ's routing registry) with SIGKILL, leaves it down for `downMs`, and starts it again. */
  killNameServer?(downMs: number): Promise<void>;
  /** Kills the proxy clients connect to with SIGKILL, the brokers behind it alive, for `downMs`, and starts it again. */
  killProxy?(downMs: number): Promise<void>;
  /**
   * Kills the primary holding the scope's keys with SIGKILL and waits until
   * a replica took over; resolves what happened, for the report, and where
   * the set-up needs the killed node back, a function that starts it again
   * (Redis set-ups with replicas).
   */
  failover?(scope: Scope): Promise<{ readonly what: string; readonly bringBack?: () => Promise<string> }>;
  /** The set-up a failover adapter runs on and the `waitReplicas` its processes use, reported on its rows. */
  readonly failoverSetup?: { readonly setup: string; readonly waitReplicas: number };
  /** Kills one of two brokers holding the work queue's queues with SIGKILL; resolves a function that brings it back. */
  killOneBroker?(scope: Scope): Promise<() => Promise<void>>;
}
