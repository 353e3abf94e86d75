/**
 * Charts sent to the dashboard by command line tools on the same machine
 * (`redeliver plan`, `redeliver simulate`): kept in memory, newest first,
 * the oldest dropped beyond {@link MAX_CHARTS}.
 */
import type { Clock } from '../time/clock.js';
import { ApiError } from './api.js';
import { randomToken } from './security.js';

/** The most charts kept; a new one beyond it drops the oldest. */
export const MAX_CHARTS = 20;
/** The largest SVG accepted, in bytes of UTF-8. */
export const MAX_CHART_BYTES = 2 * 1024 * 1024;
/** The longest title accepted, in characters. */
export const MAX_CHART_TITLE = 200;

/** A chart as the list shows it. */
export interface ChartView {
  readonly id: string;
  readonly title: string;
  /** When it arrived, ISO 8601. */
  readonly at: string;
}

interface StoredChart extends ChartView {
  readonly svg: string;
}

/** The charts of one dashboard. */
export class ChartShelf {
  /** Oldest first. */
  readonly #charts: StoredChart[] = [];

  constructor(private readonly clock: Clock) {}

  /** Validates a posted `{ title, svg }` and keeps it; throws an {@link ApiError} naming what is wrong. */
  add(body: unknown): ChartView {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new ApiError(400, 'the request body must be a JSON object {title, svg}');
    const { title, svg } = body as Record<string, unknown>;
    if (typeof title !== 'string' || title.trim() === '') throw new ApiError(400, 'title must be a non-empty string');
    if (title.length > MAX_CHART_TITLE) throw new ApiError(400, `title must be at most ${MAX_CHART_TITLE} characters`);
    if (typeof svg !== 'string' || !/^\s*<svg[\s>]/.test(svg)) throw new ApiError(400, 'svg must be an SVG document starting with <svg');
    if (Buffer.byteLength(svg, 'utf8') > MAX_CHART_BYTES) throw new ApiError(413, `svg must be at most ${MAX_CHART_BYTES} bytes`);
    const chart: StoredChart = { id: randomToken(12), title, at: new Date(this.clock.now()).toISOString(), svg };
    this.#charts.push(chart);
    if (this.#charts.length > MAX_CHARTS) this.#charts.splice(0, this.#charts.length - MAX_CHARTS);
    return view(chart);
  }

  /** Every chart kept, newest first. */
  list(): ChartView[] {
    return this.#charts.map(view).reverse();
  }

  /** The SVG of one chart, or undefined when there is no such chart (any more). */
  svg(id: string): string | undefined {
    return this.#charts.find((c) => c.id === id)?.svg;
  }
}

function view(chart: StoredChart): ChartView {
  return { id: chart.id, title: chart.title, at: chart.at };
}
