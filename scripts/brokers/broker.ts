/**
 * What `npm run brokers` knows of each broker: how to install it on a bare
 * machine, start it on loopback, tell whether it runs, and stop it.
 */

/** One broker's state, as `status --json` prints it. */
export interface BrokerStatus {
  /** Whether every port answers and the broker's own readiness probe passes. */
  readonly up: boolean;
  /** The loopback ports it listens on, by role (`amqp`, `client`, `http`, ...). */
  readonly ports: Readonly<Record<string, number>>;
  /** The installed version, or null when it is not installed. */
  readonly version: string | null;
  /** The pid of its (main) process when it runs, or null. */
  readonly pid: number | null;
}

/** A broker that `npm run brokers` can install, start, probe and stop. */
export interface Broker {
  /** Its name on the command line: `rabbitmq`, `redis`, `nats`, `nsq`, `rocketmq`. */
  readonly name: string;
  /** The loopback ports it listens on, by role. */
  readonly ports: Readonly<Record<string, number>>;
  /** Debian packages it needs, installed together with every other broker's in one `apt-get` run. */
  readonly debianPackages?: readonly string[];
  /** Installs what is missing (idempotent; fast when all is there). */
  install(say: (line: string) => void): Promise<void>;
  /** Starts it unless it runs, and resolves once it is ready (a probe, never a fixed sleep). */
  start(say: (line: string) => void): Promise<void>;
  /** Stops it when it runs; resolves once its ports are closed. */
  stop(say: (line: string) => void): Promise<void>;
  /** Its state now. */
  status(): Promise<BrokerStatus>;
  /** The log file to read when it fails to start. */
  readonly logFile: string;
}
