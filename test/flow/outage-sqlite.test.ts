import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'vitest';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { expectOutageRidden } from '../support/real-outage.js';

describe('flow control through a real outage on SQLite', () => {
  it('keeps the dependency near its normal load during the outage and handles every message after it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'redeliver-flow-'));
    const transport = new SqliteTransport({ path: join(dir, 'flow.db') });
    try {
      await expectOutageRidden(transport, 'outage', 'error');
    } finally {
      await transport.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
