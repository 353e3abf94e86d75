import { renderSvgChart, type ChartPanel, type ChartSeries } from '../planning/svg-chart.js';
import type { OutageScenario } from './outage.js';

/** One line of the chart: a setting and the downstream's calls in each second of its run. */
export interface OutageChartLine {
  readonly setting: string;
  readonly callsPerSecond: readonly number[];
}

/** Load above this multiple of the normal rate is cut off in the zoomed panel. */
const ZOOM = 3;
/** The most points a line gets: longer runs are shown as means over several seconds. */
const MAX_POINTS = 500;
const BUCKETS_SEC = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];

/**
 * The downstream's load through the outage as an SVG chart: calls per
 * second over time, one line per setting, with the outage window named
 * under the axis. When a line goes above three times the normal load, a
 * second panel shows the same lines cut off there, so the settings that
 * stay low remain readable next to one that does not.
 * @param scenario the scenario that was run (required).
 * @param lines the settings' per-second calls, in legend order (required, at least one).
 */
export function outageChart(scenario: OutageScenario, lines: readonly OutageChartLine[]): string {
  const longest = Math.max(...lines.map((line) => line.callsPerSecond.length));
  const bucket = BUCKETS_SEC.find((sec) => longest / sec <= MAX_POINTS) ?? BUCKETS_SEC[BUCKETS_SEC.length - 1]!;
  const series: ChartSeries[] = lines.map((line) => ({ name: line.setting, points: means(line.callsPerSecond, bucket) }));
  const normal = scenario.capacityPerSec * scenario.loadShare;
  const outageTo = scenario.warmupSec + scenario.outageSec;
  const xLabel = `seconds since start (outage from ${scenario.warmupSec} s to ${outageTo} s)`;
  const yLabel = bucket === 1 ? 'calls per second' : `calls per second (mean over ${bucket} s)`;
  const panels: ChartPanel[] = [{ title: 'Downstream calls per second', xLabel, yLabel, series }];
  const cap = ZOOM * normal;
  if (series.some((s) => s.points.some((p) => p.y > cap))) {
    panels.push({
      title: `The same, cut off at ${ZOOM}× the normal load`,
      xLabel,
      yLabel,
      series: series.map((s) => ({ name: s.name, points: s.points.map((p) => ({ x: p.x, y: Math.min(p.y, cap) })) })),
    });
  }
  return renderSvgChart(panels, { title: outageChartTitle(scenario) });
}

/** The heading of {@link outageChart}: the downstream's capacity and its normal load. */
export function outageChartTitle(scenario: OutageScenario): string {
  const normal = scenario.capacityPerSec * scenario.loadShare;
  return `Load on a downstream through an outage: capacity ${formatRate(scenario.capacityPerSec)}/s, normal load ${formatRate(normal)}/s`;
}

/** Means of `values` over consecutive buckets of `size`, each placed at its bucket's start. */
function means(values: readonly number[], size: number): { x: number; y: number }[] {
  const points: { x: number; y: number }[] = [];
  for (let start = 0; start < values.length; start += size) {
    const slice = values.slice(start, start + size);
    points.push({ x: start, y: slice.reduce((a, b) => a + b, 0) / slice.length });
  }
  return points;
}

function formatRate(perSec: number): string {
  return String(Number(perSec.toPrecision(4)));
}
