import type { Command } from 'commander';
import { publishChart } from '../dashboard/chart-feed.js';
import { writePrivateFile } from '../util/private-file.js';
import { oneLine } from './format.js';
import type { CliIo } from './program.js';

/** The flags {@link addChartOptions} adds, as commander parses them. */
export interface ChartFlags {
  svg?: string;
  /** False with `--no-dashboard`. */
  dashboard: boolean;
}

/**
 * Adds `--svg <file>` and `--no-dashboard`: a command's chart is written to
 * the file when one is given, and shown on the dashboard when one is running
 * on this machine (`redeliver dashboard` announces itself in a runtime file).
 */
export function addChartOptions(command: Command, what: string): Command {
  return command
    .option('--svg <file>', `write ${what} to this SVG file (mode 0600; a symbolic link is refused)`)
    .option('--no-dashboard', 'do not show the chart on a running dashboard');
}

/**
 * Delivers a command's chart: to the `--svg` file, and to a running
 * dashboard unless `--no-dashboard`. Renders it only when it goes somewhere.
 * Returns one line per destination for the command to print; a dashboard
 * that is not running is the usual case and gives no line.
 */
export async function deliverChart(title: string, render: () => string, flags: ChartFlags, io: Pick<CliIo, 'env'>): Promise<string[]> {
  let svg: string | undefined;
  const chart = () => (svg ??= render());
  const lines: string[] = [];
  if (flags.svg !== undefined) {
    await writePrivateFile(flags.svg, chart());
    lines.push(`Chart written to ${oneLine(flags.svg)}`);
  }
  if (flags.dashboard) {
    const shown = await publishChart({ title, svg: chart() }, { env: io.env ?? process.env });
    // The answer comes from whatever listens at the runtime file's address: escaped before it reaches a terminal.
    if (shown && 'url' in shown) lines.push(`Chart shown on the dashboard: ${oneLine(shown.url)}`);
    else if (shown) lines.push(`Chart not shown on the dashboard: ${oneLine(shown.refused)}`);
  }
  return lines;
}
