/**
 * SQLite in `npm run bench -- latency`: a SqliteTransport on a database
 * file of its own in a temporary directory, removed afterwards. No bare
 * client sits beside it: SQLite is a library, not a broker with a consumer
 * protocol, so there is no other consumer of the same queue to compare
 * with.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { type BrokerCase, type CaseSettings } from './rig.js';

export function sqliteCase(settings: CaseSettings): BrokerCase {
  const dir = mkdtempSync(join(tmpdir(), `redeliver-bench-latency-${settings.token}-`));
  return {
    name: 'sqlite',
    bareName: undefined,
    bare: undefined,
    transport: (side) => ({ transport: new SqliteTransport({ path: join(dir, `latency-${side}.db`) }), queue: 'latency' }),
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
}
