/**
 * A TCP proxy on loopback in front of one server port, whose `cut()` closes
 * every connection passing through it at once: to the client it is the
 * server closing its connection, to the server the client going away. Tests
 * use it to cut clients off a server that has no API to close one client's
 * connection (NATS 2.9 without a system account), and only the clients that
 * connect through it. New connections are accepted again right after a cut.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';

/** A running proxy; start it with {@link TcpProxy.start}. */
export class TcpProxy {
  /** Client and server sockets of each connection passing through. */
  readonly #pairs = new Set<readonly [Socket, Socket]>();

  private constructor(
    private readonly server: Server,
    /** The port clients connect to, on 127.0.0.1. */
    readonly port: number,
    /** The port connections are passed on to, on 127.0.0.1. */
    readonly targetPort: number,
  ) {}

  /** Listens on a free port of 127.0.0.1 and passes each connection on to 127.0.0.1:`targetPort`. */
  static async start(targetPort: number): Promise<TcpProxy> {
    const server = createServer({ noDelay: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    const proxy = new TcpProxy(server, port, targetPort);
    server.on('connection', (client) => proxy.#pass(client));
    return proxy;
  }

  /** Connections passing through now. */
  get connections(): number {
    return this.#pairs.size;
  }

  /**
   * Stops passing on what the server sends, on every connection passing
   * through now: it waits in the proxy, and is dropped by the next cut. What
   * clients send still reaches the server.
   */
  holdReplies(): void {
    for (const [client, upstream] of this.#pairs) {
      upstream.unpipe(client);
      upstream.pause();
    }
  }

  /** Passes on again what the server sends, what was held first: the connection was slow, not broken. */
  releaseReplies(): void {
    for (const [client, upstream] of this.#pairs) {
      upstream.pipe(client);
      upstream.resume();
    }
  }

  /** Closes every connection passing through (both sides); resolves how many there were. */
  cut(): number {
    const count = this.#pairs.size;
    for (const [client, upstream] of this.#pairs) {
      client.destroy();
      upstream.destroy();
    }
    this.#pairs.clear();
    return count;
  }

  /** Cuts every connection and stops listening. */
  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  #pass(client: Socket): void {
    const upstream = createConnection({ host: '127.0.0.1', port: this.targetPort, noDelay: true });
    const pair = [client, upstream] as const;
    this.#pairs.add(pair);
    // Either side ending or failing ends both: a dead server closes its clients' connections, as it would without the proxy.
    const end = () => {
      this.#pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    for (const socket of pair) {
      socket.on('error', end);
      socket.on('close', end);
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }
}
