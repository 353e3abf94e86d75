import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { describeSchema } from './schema-suite.js';

const dir = mkdtempSync(join(tmpdir(), 'redeliver-schema-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describeSchema('sqlite', (clock) => new SqliteTransport({ path: join(dir, `${Math.random().toString(36).slice(2)}.db`), clock }));
