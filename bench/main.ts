/**
 * `npm run bench -- <scenario>`: runs one benchmark from bench/scenarios/.
 * Each scenario prints a readable table and, as its last line, one JSON
 * object with its figures.
 *
 * `npm run bench` compiles the library and the benchmarks with `tsc` first
 * (tsconfig.bench.json, into .bench/dist) and runs the JavaScript, as an
 * application that installed the package runs it: a TypeScript loader run
 * on the fly adds work per call of its own (such as naming every function
 * it makes) that the published package does not do.
 */
import { readdirSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { join } from 'node:path';

const dir = join(fileURLToPath(new URL('.', import.meta.url)), 'scenarios');
/** `.js` once compiled; `.ts` when run from source through a loader. */
const extension = fileURLToPath(import.meta.url).endsWith('.js') ? '.js' : '.ts';
const available = readdirSync(dir).filter((f) => f.endsWith(extension)).map((f) => f.slice(0, -extension.length)).sort();
const name = process.argv[2];

if (!name || !available.includes(name)) {
  console.error(`usage: npm run bench -- <scenario>\nscenarios: ${available.join(', ')}`);
  process.exit(2);
}

const scenario = (await import(pathToFileURL(join(dir, `${name}${extension}`)).href)) as { run(args: string[]): Promise<void> };
await scenario.run(process.argv.slice(3));
