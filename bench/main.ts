/**
 * `npm run bench -- <scenario>`: runs one benchmark from bench/scenarios/.
 * Each scenario prints a readable table and, as its last line, one JSON
 * object with its figures.
 */
import { readdirSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { join } from 'node:path';

const dir = join(fileURLToPath(new URL('.', import.meta.url)), 'scenarios');
const available = readdirSync(dir).filter((f) => f.endsWith('.ts')).map((f) => f.slice(0, -3)).sort();
const name = process.argv[2];

if (!name || !available.includes(name)) {
  console.error(`usage: npm run bench -- <scenario>\nscenarios: ${available.join(', ')}`);
  process.exit(2);
}

const scenario = (await import(pathToFileURL(join(dir, `${name}.ts`)).href)) as { run(args: string[]): Promise<void> };
await scenario.run(process.argv.slice(3));
