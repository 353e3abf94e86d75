import { describe, expect, it } from 'vitest';
import { renderSvgChart } from '../../src/planning/svg-chart.js';

const panel = {
  title: 'calls <by> clients',
  xLabel: 'clients',
  yLabel: 'calls',
  series: [
    { name: 'full & jitter', points: [{ x: 10, y: 100 }, { x: 20, y: 400 }, { x: 50, y: 2_000 }] },
    { name: 'none', points: [{ x: 10, y: 300 }, { x: 20, y: 1_500 }, { x: 50, y: 90_000 }] },
  ],
};

describe('renderSvgChart', () => {
  it('draws one line and one legend entry per series, with escaped text', () => {
    const svg = renderSvgChart([panel, { ...panel, title: 'time', yScale: 'log' }], { title: 'Contention' });
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    expect(svg.match(/<polyline /g)).toHaveLength(4);
    expect(svg).toContain('full &amp; jitter');
    expect(svg).toContain('calls &lt;by&gt; clients');
    expect(svg).not.toContain('<by>');
    expect(svg).toContain('(log scale)');
    expect(svg).not.toMatch(/NaN|Infinity/);
  });

  it('puts a larger value higher on the panel', () => {
    const svg = renderSvgChart([{ title: 't', xLabel: 'x', yLabel: 'y', series: [{ name: 's', points: [{ x: 0, y: 1 }, { x: 1, y: 5 }] }] }]);
    const [first, second] = [...svg.matchAll(/<circle cx="([\d.]+)" cy="([\d.]+)"/g)].map((m) => ({ x: Number(m[1]), y: Number(m[2]) }));
    expect(second!.x).toBeGreaterThan(first!.x);
    expect(second!.y).toBeLessThan(first!.y);
  });

  it('refuses values a log scale cannot show and points that are not finite', () => {
    expect(() => renderSvgChart([{ ...panel, yScale: 'log', series: [{ name: 'z', points: [{ x: 1, y: 0 }] }] }])).toThrow(/log scale/);
    expect(() => renderSvgChart([{ ...panel, series: [{ name: 'n', points: [{ x: 1, y: NaN }] }] }])).toThrow(/not finite/);
    expect(() => renderSvgChart([])).toThrow(/at least one panel/);
  });
});
