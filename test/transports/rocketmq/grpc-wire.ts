/**
 * A gRPC (HTTP/2, plaintext) forwarding proxy for tests, in front of a
 * RocketMQ gRPC proxy: every stream is passed through unchanged, and each
 * `SendMessage` call is recorded as the wire saw it: when its request
 * arrived, the message keys it carried, and the status code the proxy
 * answered. The times come from this process's monotonic clock at the
 * socket, not from the client's timers, so a test reads a producer's retry
 * schedule off the wire.
 */
import { performance } from 'node:perf_hooks';
import http2, { type ClientHttp2Session, type Http2Server, type IncomingHttpHeaders, type OutgoingHttpHeaders, type ServerHttp2Session } from 'node:http2';
import type { AddressInfo } from 'node:net';
import servicePb from 'rocketmq-client-nodejs/proto/apache/rocketmq/v2/service_pb.js';

const { SendMessageRequest, SendMessageResponse } = servicePb;

/** One `SendMessage` call on the wire. */
export interface WireSend {
  /** When its request's headers arrived (ms, `performance.now()`). */
  readonly requestAt: number;
  /** The keys of its messages (redeliver puts the message id there). */
  readonly keys: readonly string[];
  /** When its answer arrived, and the status code in it (20000 OK, 42900 TOO_MANY_REQUESTS...); unset while it waits, or when the call ended without one. */
  answeredAt?: number;
  code?: number;
  statusMessage?: string;
}

const SEND_PATH = '/apache.rocketmq.v2.MessagingService/SendMessage';

/** The payload of the first gRPC frame of `data` (5-byte prefix: compressed flag, length). */
function firstFrame(data: Buffer): Uint8Array | undefined {
  if (data.length < 5) return undefined;
  const length = data.readUInt32BE(1);
  return data.length >= 5 + length ? data.subarray(5, 5 + length) : undefined;
}

/** Headers fit to forward: everything but the pseudo-headers HTTP/2 sets itself on a response. */
function forwardable(headers: IncomingHttpHeaders, keepPseudo: boolean): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    if (name.startsWith(':') && !(keepPseudo || name === ':status')) continue;
    out[name] = value;
  }
  return out;
}

export class GrpcWire {
  /** Every `SendMessage` call seen, in arrival order. */
  readonly sends: WireSend[] = [];
  readonly #sessions = new Set<ServerHttp2Session | ClientHttp2Session>();
  #openStreams = 0;

  private constructor(
    readonly server: Http2Server,
    readonly upstreamPort: number,
  ) {}

  /** Starts listening on a free loopback port (or `port`), forwarding to 127.0.0.1:`upstreamPort`. */
  static async start(upstreamPort: number, port = 0): Promise<GrpcWire> {
    const server = http2.createServer();
    const wire = new GrpcWire(server, upstreamPort);
    server.on('session', (session) => wire.#bridge(session));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    return wire;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** The `SendMessage` calls that carried `key`. */
  sendsOf(key: string): WireSend[] {
    return this.sends.filter((s) => s.keys.includes(key));
  }

  /** Streams passing through now (a client's telemetry stream stays open while it runs). */
  get openStreams(): number {
    return this.#openStreams;
  }

  async close(): Promise<void> {
    for (const s of this.#sessions) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** One upstream session per client session: each stream of the one is a stream of the other. */
  #bridge(session: ServerHttp2Session): void {
    const upstream = http2.connect(`http://127.0.0.1:${this.upstreamPort}`);
    this.#sessions.add(session);
    this.#sessions.add(upstream);
    const closeBoth = () => {
      this.#sessions.delete(session);
      this.#sessions.delete(upstream);
      if (!session.destroyed) session.destroy();
      if (!upstream.destroyed) upstream.destroy();
    };
    session.on('close', closeBoth);
    session.on('error', closeBoth);
    upstream.on('close', closeBoth);
    upstream.on('error', closeBoth);
    session.on('stream', (stream, headers) => {
      const record = headers[':path'] === SEND_PATH ? this.#recordSend() : undefined;
      let out;
      try {
        out = upstream.request(forwardable(headers, true));
      } catch {
        stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
        return;
      }
      this.#openStreams++;
      out.once('close', () => this.#openStreams--);
      const requestChunks: Buffer[] = [];
      const answerChunks: Buffer[] = [];
      let trailers: OutgoingHttpHeaders = {};
      stream.on('data', (chunk: Buffer) => {
        if (record) requestChunks.push(chunk);
        out.write(chunk);
      });
      stream.on('end', () => {
        out.end();
        if (record) this.#readRequest(record, Buffer.concat(requestChunks));
      });
      stream.on('error', () => out.close(http2.constants.NGHTTP2_CANCEL));
      stream.on('close', () => {
        if (!out.closed) out.close(http2.constants.NGHTTP2_CANCEL);
      });
      out.on('response', (responseHeaders, flags) => {
        if (stream.destroyed) return;
        // A trailers-only answer (an error status) ends the stream with its headers.
        const endStream = (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0;
        if (endStream && record) this.#readAnswer(record, Buffer.alloc(0), responseHeaders);
        stream.respond(forwardable(responseHeaders, false), endStream ? { endStream: true } : { waitForTrailers: true });
      });
      stream.on('wantTrailers', () => stream.sendTrailers(trailers));
      out.on('data', (chunk: Buffer) => {
        if (record) answerChunks.push(chunk);
        if (!stream.destroyed) stream.write(chunk);
      });
      out.on('trailers', (t) => {
        trailers = forwardable(t, false);
      });
      out.on('end', () => {
        if (record && record.answeredAt === undefined) this.#readAnswer(record, Buffer.concat(answerChunks), trailers as IncomingHttpHeaders);
        if (!stream.destroyed && !stream.closed) stream.end();
      });
      out.on('error', () => {
        if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
      });
    });
  }

  #recordSend(): WireSend {
    const record: WireSend = { requestAt: performance.now(), keys: [] };
    this.sends.push(record);
    return record;
  }

  #readRequest(record: WireSend, body: Buffer): void {
    const frame = firstFrame(body);
    if (frame === undefined) return;
    const request = SendMessageRequest.deserializeBinary(frame);
    (record as { keys: readonly string[] }).keys = request.getMessagesList().flatMap((m) => m.getSystemProperties()?.getKeysList() ?? []);
  }

  #readAnswer(record: WireSend, body: Buffer, trailers: IncomingHttpHeaders): void {
    record.answeredAt = performance.now();
    const frame = firstFrame(body);
    if (frame !== undefined) {
      const status = SendMessageResponse.deserializeBinary(frame).getStatus();
      record.code = status?.getCode();
      record.statusMessage = status?.getMessage();
    } else {
      record.statusMessage = `grpc-status ${String(trailers['grpc-status'])}: ${String(trailers['grpc-message'] ?? '')}`;
    }
  }
}
