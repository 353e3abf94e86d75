/**
 * Line charts as standalone SVG text: one or more panels side by side, each
 * with axes, ticks, a title and a legend. No dependencies and no script, so
 * the file opens in any browser and can be shown in an `<img>`.
 */

/** One line of a panel. */
export interface ChartSeries {
  /** The name in the legend. */
  readonly name: string;
  /** The points, drawn in the order given. */
  readonly points: readonly { readonly x: number; readonly y: number }[];
}

/** One plot. */
export interface ChartPanel {
  readonly title: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly series: readonly ChartSeries[];
  /** `log` for values spanning orders of magnitude (every value must then be above 0). Default `linear`. */
  readonly yScale?: 'linear' | 'log';
}

/** Options of {@link renderSvgChart}. */
export interface ChartOptions {
  /** A heading above the panels. Default none. */
  readonly title?: string;
  /** Width of one panel in pixels. Default 480. */
  readonly panelWidth?: number;
  /** Height of one panel in pixels. Default 320. */
  readonly panelHeight?: number;
}

/** Colours of the series, in order (a palette readable by people with the common colour-vision deficiencies). */
const PALETTE = ['#0072b2', '#d55e00', '#009e73', '#cc79a7', '#e69f00', '#56b4e9', '#000000', '#f0e442'];
const MARGIN = { top: 34, right: 16, bottom: 46, left: 64 };
const LEGEND_LINE = 16;

/** Renders `panels` side by side as one SVG document. */
export function renderSvgChart(panels: readonly ChartPanel[], options: ChartOptions = {}): string {
  if (panels.length === 0) throw new RangeError('renderSvgChart: at least one panel is required');
  const panelWidth = options.panelWidth ?? 480;
  const panelHeight = options.panelHeight ?? 320;
  const heading = options.title === undefined ? 0 : 28;
  const legendRows = Math.max(...panels.map((p) => p.series.length));
  const width = panelWidth * panels.length;
  const height = heading + panelHeight + legendRows * LEGEND_LINE + 8;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
  ];
  if (options.title !== undefined) parts.push(`<text x="${width / 2}" y="19" text-anchor="middle" font-size="14" font-weight="bold">${escapeXml(options.title)}</text>`);
  panels.forEach((panel, i) => parts.push(renderPanel(panel, i * panelWidth, heading, panelWidth, panelHeight)));
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}

function renderPanel(panel: ChartPanel, left: number, top: number, width: number, height: number): string {
  const log = panel.yScale === 'log';
  const points = panel.series.flatMap((s) => s.points);
  for (const p of points) {
    if (!Number.isFinite(p.x) || !Number.isFinite(p.y)) throw new RangeError(`renderSvgChart: '${panel.title}' has a point that is not finite`);
    if (log && p.y <= 0) throw new RangeError(`renderSvgChart: '${panel.title}' uses a log scale but has a value <= 0`);
  }
  const plot = { x: left + MARGIN.left, y: top + MARGIN.top, w: width - MARGIN.left - MARGIN.right, h: height - MARGIN.top - MARGIN.bottom };
  const xs = points.map((p) => p.x);
  const ys = points.map((p) => (log ? Math.log10(p.y) : p.y));
  const xTicks = niceTicks(Math.min(...xs, 0), Math.max(...xs, 1));
  const yTicks = log ? logTicks(Math.min(...ys), Math.max(...ys)) : niceTicks(Math.min(...ys, 0), Math.max(...ys, 1));
  const [x0, x1] = [xTicks[0]!, xTicks[xTicks.length - 1]!];
  const [y0, y1] = [yTicks[0]!, yTicks[yTicks.length - 1]!];
  const sx = (x: number) => plot.x + ((x - x0) / (x1 - x0 || 1)) * plot.w;
  const sy = (y: number) => plot.y + plot.h - (((log ? Math.log10(y) : y) - y0) / (y1 - y0 || 1)) * plot.h;
  const out: string[] = [`<g>`];
  out.push(`<text x="${left + width / 2}" y="${top + 18}" text-anchor="middle" font-size="12" font-weight="bold">${escapeXml(panel.title)}</text>`);
  for (const t of yTicks) {
    const y = fixed(plot.y + plot.h - ((t - y0) / (y1 - y0 || 1)) * plot.h);
    out.push(`<line x1="${plot.x}" y1="${y}" x2="${plot.x + plot.w}" y2="${y}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${plot.x - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${formatTick(log ? 10 ** t : t)}</text>`);
  }
  for (const t of xTicks) {
    const x = fixed(sx(t));
    out.push(`<line x1="${x}" y1="${plot.y + plot.h}" x2="${x}" y2="${plot.y + plot.h + 4}" stroke="#333"/>`);
    out.push(`<text x="${x}" y="${plot.y + plot.h + 16}" text-anchor="middle">${formatTick(t)}</text>`);
  }
  out.push(`<rect x="${plot.x}" y="${plot.y}" width="${plot.w}" height="${plot.h}" fill="none" stroke="#333"/>`);
  out.push(`<text x="${plot.x + plot.w / 2}" y="${plot.y + plot.h + 34}" text-anchor="middle">${escapeXml(panel.xLabel)}</text>`);
  const yMid = plot.y + plot.h / 2;
  out.push(`<text x="${left + 14}" y="${yMid}" text-anchor="middle" transform="rotate(-90 ${left + 14} ${yMid})">${escapeXml(panel.yLabel)}${log ? ' (log scale)' : ''}</text>`);
  panel.series.forEach((series, i) => {
    const colour = PALETTE[i % PALETTE.length]!;
    const path = series.points.map((p) => `${fixed(sx(p.x))},${fixed(sy(p.y))}`).join(' ');
    if (series.points.length > 1) out.push(`<polyline points="${path}" fill="none" stroke="${colour}" stroke-width="2"/>`);
    if (series.points.length <= 40) for (const p of series.points) out.push(`<circle cx="${fixed(sx(p.x))}" cy="${fixed(sy(p.y))}" r="2.5" fill="${colour}"/>`);
    const ly = top + height + i * LEGEND_LINE;
    out.push(`<line x1="${plot.x}" y1="${ly}" x2="${plot.x + 18}" y2="${ly}" stroke="${colour}" stroke-width="3"/>`);
    out.push(`<text x="${plot.x + 24}" y="${ly}" dominant-baseline="middle">${escapeXml(series.name)}</text>`);
  });
  out.push('</g>');
  return out.join('\n');
}

/** Round tick values covering [min, max], about five of them. */
function niceTicks(min: number, max: number): number[] {
  const span = max - min || Math.abs(max) || 1;
  const rough = span / 5;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => span / s <= 6) ?? 10 * magnitude;
  const start = Math.floor(min / step) * step;
  const ticks: number[] = [];
  for (let t = start; t < max + step - step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
  if (ticks.length < 2) ticks.push(start + step);
  return ticks;
}

/** Whole powers of ten covering [min, max] (values are log10 already). */
function logTicks(min: number, max: number): number[] {
  const ticks: number[] = [];
  for (let t = Math.floor(min); t <= Math.ceil(max); t++) ticks.push(t);
  if (ticks.length < 2) ticks.push(ticks[0]! + 1);
  return ticks;
}

function formatTick(value: number): string {
  const abs = Math.abs(value);
  if (abs >= 1e6) return `${Number((value / 1e6).toPrecision(3))}M`;
  if (abs >= 1e4) return `${Number((value / 1e3).toPrecision(3))}k`;
  return String(Number(value.toPrecision(4)));
}

function fixed(n: number): string {
  return n.toFixed(1);
}

/** Escapes text for XML content and attributes. */
export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c]!);
}
