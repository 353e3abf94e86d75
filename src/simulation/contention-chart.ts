import { renderSvgChart, type ChartPanel } from '../planning/svg-chart.js';
import type { ContentionRow } from './contention.js';

/**
 * The contention results as an SVG chart: mean calls and mean completion
 * time against the number of clients, one line per strategy. A panel whose
 * values span at least a factor of ten uses a log scale.
 * @param rows the rows of a simulation (required).
 * @param title the heading above the panels (default none).
 */
export function contentionChart(rows: readonly ContentionRow[], title?: string): string {
  const strategies = [...new Set(rows.map((row) => row.strategy))];
  const panel = (panelTitle: string, yLabel: string, value: (row: ContentionRow) => number): ChartPanel => {
    const values = rows.map(value);
    const log = Math.min(...values) > 0 && Math.max(...values) / Math.min(...values) >= 10;
    return {
      title: panelTitle,
      xLabel: 'clients',
      yLabel,
      yScale: log ? 'log' : 'linear',
      series: strategies.map((strategy) => ({
        name: strategy,
        points: rows.filter((row) => row.strategy === strategy).map((row) => ({ x: row.clients, y: value(row) })),
      })),
    };
  };
  return renderSvgChart(
    [
      panel('Work: mean calls (reads + writes)', 'calls', (row) => row.calls),
      panel('Mean completion time', 'milliseconds', (row) => row.completionMs),
    ],
    title === undefined ? {} : { title },
  );
}
