/**
 * Shows a chart on the running dashboard, if there is one: the client side
 * of `POST /api/charts`, found through the runtime file `redeliver
 * dashboard` writes (see runtime-file.ts). No dashboard is the usual case
 * and is no error.
 */
import { request, type IncomingMessage } from 'node:http';
import { MAX_CHART_BYTES } from './charts.js';
import { isProcessAlive, readRuntimeFile, runtimeFilePath } from './runtime-file.js';

/** A chart: a title and a standalone SVG document (`renderSvgChart`). */
export interface Chart {
  readonly title: string;
  readonly svg: string;
}

/** Options of {@link publishChart}. */
export interface PublishChartOptions {
  /** Where `REDELIVER_STATE_DIR` is read (the directory of the runtime file). Default `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** How long to wait for the dashboard to answer, in milliseconds. Default 2000. */
  readonly timeoutMs?: number;
}

/**
 * What became of a chart: shown (`url` is its address on the dashboard),
 * refused (`refused` says why, such as `HTTP 403: a valid chart token is
 * required…`), or undefined when no dashboard is running or
 * it did not answer in time.
 */
export type PublishChartResult = { readonly url: string } | { readonly refused: string } | undefined;

/** The most of an answer read, in bytes. */
const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * Sends `chart` to the dashboard named by the runtime file. Resolves
 * undefined, quietly and without waiting, when there is no runtime file or
 * the process it names is gone; undefined too when the dashboard does not
 * answer within `timeoutMs`. Never rejects.
 */
export async function publishChart(chart: Chart, options: PublishChartOptions = {}): Promise<PublishChartResult> {
  const runtime = await readRuntimeFile(runtimeFilePath(options.env ?? process.env));
  if (runtime === undefined || !isProcessAlive(runtime.pid)) return undefined;
  const size = Buffer.byteLength(chart.svg, 'utf8');
  if (size > MAX_CHART_BYTES) return { refused: `the chart is ${size} bytes; the dashboard takes at most ${MAX_CHART_BYTES}` };
  let answer: { status: number; text: string } | undefined;
  try {
    answer = await post(new URL('api/charts', runtime.url), runtime.chartToken, JSON.stringify({ title: chart.title, svg: chart.svg }), options.timeoutMs ?? 2_000);
  } catch {
    return undefined; // an address no request can be made to: as good as no dashboard
  }
  if (answer === undefined) return undefined;
  let body: unknown;
  try {
    body = JSON.parse(answer.text);
  } catch {
    body = undefined;
  }
  const fields = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  if (answer.status === 200 && typeof fields['url'] === 'string') return { url: fields['url'] };
  const why = typeof fields['error'] === 'string' ? fields['error'] : 'unexpected answer';
  return { refused: `HTTP ${answer.status}: ${why}` };
}

/**
 * POSTs `body`; resolves the answer, or undefined when there was none within
 * `timeoutMs` (nothing listening, or too slow). Throws only when no request
 * can be made to `url`.
 */
function post(url: URL, token: string, body: string, timeoutMs: number): Promise<{ status: number; text: string } | undefined> {
  return new Promise((resolve) => {
    let settled = false;
    const settle = (value: { status: number; text: string } | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve(value);
    };
    const req = request(
      url,
      {
        method: 'POST',
        agent: false,
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), Accept: 'application/json' },
      },
      (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size <= MAX_ANSWER_BYTES) chunks.push(chunk);
        });
        res.on('end', () => settle({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', () => settle(undefined));
      },
    );
    const timer = setTimeout(() => settle(undefined), timeoutMs);
    req.on('error', () => settle(undefined));
    req.end(body);
  });
}
