import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { ERROR_STORE_SCHEMA_VERSION } from '../../src/error-store/schema.js';
import { ErrorStore, type ErrorStoreOptions } from '../../src/error-store/store.js';
import { foldText, TEXT_INDEX_STEP_GAP_MS } from '../../src/error-store/text-index.js';
import { HEADER } from '../../src/headers/names.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { failureHeaders, scratchDir } from './support.js';

const T0 = Date.parse('2026-11-23T10:00:00.000Z');
const stores: ErrorStore[] = [];
afterEach(() => {
  for (const s of stores.splice(0)) s.close();
});

function open(options: ErrorStoreOptions = {}, file = join(scratchDir(), 'errors.db')): { store: ErrorStore; clock: FakeClock; file: string } {
  const clock = new FakeClock(T0);
  const store = ErrorStore.open(file, { clock, textIndexIdleMs: 200, textIndexMaxWaitMs: 2_000, ...options });
  stores.push(store);
  return { store, clock, file };
}

function entry(id: string, message: string, errorName = 'Error') {
  return {
    errorQueue: 'error',
    messageId: id,
    headers: { ...failureHeaders({ message, errorName, at: new Date(T0 - 60_000).toISOString() }), [HEADER.entryId]: `e-${id}` },
    body: Buffer.from(`{"id":"${id}"}`),
  };
}

/** The mark and the rows of the full-text index, read from the file. */
function indexState(store: ErrorStore): { mark: number; indexed: number } {
  const db = store.database;
  return {
    mark: db.prepare<[], number>(`SELECT value FROM meta WHERE key = 'text_indexed'`).pluck(true).get()!,
    indexed: db.prepare<[], number>(`SELECT count(*) FROM entries_text_docsize`).pluck(true).get()!,
  };
}

/** Checks the index against its content; only meaningful once it has caught up with every entry. */
function integrityCheck(store: ErrorStore): void {
  store.database.exec(`INSERT INTO entries_text (entries_text, rank) VALUES ('integrity-check', 1)`);
}

const found = (store: ErrorStore, text: string) =>
  store
    .search({ text, status: 'any' })
    .entries.map((e) => e.messageId)
    .sort();

const MESSAGES: [string, string, string][] = [
  ['m1', 'Card DECLINED by issuer', 'PaymentError'],
  ['m2', 'Échec du paiement: délai dépassé', 'Error'],
  ['m3', 'ΣΦΑΛΜΑ στη βάση', 'Error'],
  ['m4', 'db timeout after 30 ms', 'TimeoutError'],
  ['m5', 'straße gesperrt', 'Error'],
  ['m6', 'Faſt µ-service down', 'Error'],
];
const QUERIES = ['declined', 'card declined', 'échec', 'ÉCHEC', 'DÉLAI', 'σφάλμα', 'ΣΦΑΛΜΑ', 'ΣΤΗ', 'timeouterror', 'STRASSE', 'STRAßE', 'e-m3', 'M4', 'xyz', 'paymenterror', 'FAST', 'Μ-SERVICE'];

describe('ErrorStore full-text index caught up outside ingest', () => {
  it('finds an entry right after ingest, before the index caught up, and the same entries after', async () => {
    const { store, clock } = open();
    await store.ingest(MESSAGES.map(([id, message, name]) => entry(id, message, name)));
    expect(indexState(store)).toEqual({ mark: 0, indexed: 0 });
    expect(store.textIndexBehind()).toBe(true);
    const before = Object.fromEntries(QUERIES.map((q) => [q, found(store, q)]));
    expect(before['declined']).toEqual(['m1']);
    expect(before['ÉCHEC']).toEqual(['m2']);
    expect(before['σφάλμα']).toEqual([]); // diacritics are kept, as the trigram index keeps them
    expect(before['ΣΦΑΛΜΑ']).toEqual(['m3']);
    expect(before['ΣΤΗ']).toEqual(['m3']);
    expect(before['STRASSE']).toEqual([]);
    expect(before['STRAßE']).toEqual(['m5']);
    expect(before['M4']).toEqual(['m4']);
    expect(before['xyz']).toEqual([]);
    expect(before['FAST']).toEqual(['m6']); // the long s folds to s, as in the index
    expect(before['Μ-SERVICE']).toEqual(['m6']); // the micro sign folds to Greek mu

    await clock.advance(200);
    expect(indexState(store)).toEqual({ mark: 6, indexed: 6 });
    expect(store.textIndexBehind()).toBe(false);
    const after = Object.fromEntries(QUERIES.map((q) => [q, found(store, q)]));
    expect(after).toEqual(before);
    integrityCheck(store);
  });

  it('folds case one character at a time by the trigram tokenizer\'s own table', () => {
    expect(foldText('ÉCHEC ΣΦΑΛΜΑ Straße')).toBe('échec σφαλμα straße');
    expect(foldText('ſ µ K')).toBe('s μ k'); // long s, micro sign, Kelvin sign: folded as SQLite folds them
  });

  it('searches indexed and not-yet-indexed entries together, and keeps counts and bulk actions right', async () => {
    const { store, clock } = open();
    await store.ingest([entry('a1', 'card declined'), entry('a2', 'card declined')]);
    await clock.advance(200);
    await store.ingest([entry('a3', 'Card Declined'), entry('a4', 'db timeout')]);
    expect(indexState(store).mark).toBe(2);
    expect(found(store, 'declined')).toEqual(['a1', 'a2', 'a3']);
    expect(store.count({ text: 'DECLINED' })).toBe(3);
    expect(store.count({ text: 'declined', maxSeq: 2 })).toBe(2);
    expect(await store.delete({ text: 'declined' }, 'cli:alice')).toBe(3);
    expect(store.count({ text: 'declined' })).toBe(0);
    expect(store.count({ text: 'declined', status: 'deleted' })).toBe(3);
  });

  it('keeps the index right when an entry is changed or deleted, indexed or not yet', async () => {
    const { store, clock } = open();
    await store.ingest([entry('i1', 'card declined'), entry('i2', 'card declined')]);
    await clock.advance(200);
    await store.ingest([entry('u1', 'card declined'), entry('u2', 'card declined')]);
    expect(indexState(store)).toEqual({ mark: 2, indexed: 2 });
    const db = store.database;
    // Deleted by an operator (status and body change): still found with status any, in both states.
    expect(await store.deleteOne('e-i1', 'cli:alice')).toBe(true);
    expect(await store.deleteOne('e-u1', 'cli:alice')).toBe(true);
    expect(store.search({ text: 'declined' }).entries.map((e) => e.messageId).sort()).toEqual(['i2', 'u2']);
    expect(found(store, 'declined')).toEqual(['i1', 'i2', 'u1', 'u2']);
    // The searched text itself changed: the indexed row through the trigger, the other read directly.
    db.prepare(`UPDATE entries SET message = 'payment refused' WHERE message_id IN ('i2', 'u2')`).run();
    expect(found(store, 'declined')).toEqual(['i1', 'u1']);
    expect(found(store, 'refused')).toEqual(['i2', 'u2']);
    // Removed from the table: the indexed row leaves the index, the other is simply gone.
    db.prepare(`DELETE FROM entries WHERE message_id IN ('i1', 'u1')`).run();
    expect(found(store, 'declined')).toEqual([]);
    expect(indexState(store)).toEqual({ mark: 2, indexed: 1 });
    await clock.advance(200);
    expect(indexState(store)).toEqual({ mark: 4, indexed: 2 });
    expect(found(store, 'refused')).toEqual(['i2', 'u2']);
    integrityCheck(store);
  });

  it('catches up a bounded step at a time, at quiet moments, driven by the store clock', async () => {
    const { store, clock } = open({ textIndexRowsPerStep: 100 });
    await store.ingest(Array.from({ length: 250 }, (_, i) => entry(`s${i}`, `failure number ${i}`)));
    await clock.advance(150);
    expect(indexState(store).mark).toBe(0); // not quiet long enough yet
    await store.ingest([entry('late', 'failure late')]); // another ingest starts the quiet time again
    await clock.advance(150);
    expect(indexState(store).mark).toBe(0);
    await clock.advance(50);
    // One step of at most 100 entries, then a pause before the next.
    expect(indexState(store)).toEqual({ mark: 100, indexed: 100 });
    expect(store.count({ text: 'failure number 24', status: 'any' })).toBe(11); // between steps, search is complete
    await clock.advance(TEXT_INDEX_STEP_GAP_MS - 1);
    expect(indexState(store).mark).toBe(100);
    await clock.advance(1);
    expect(indexState(store).mark).toBe(200);
    await clock.advance(TEXT_INDEX_STEP_GAP_MS);
    expect(indexState(store)).toEqual({ mark: 251, indexed: 251 });
    expect(clock.pending).toBe(0); // caught up: nothing left sleeping
    expect(store.count({ text: 'failure number 24', status: 'any' })).toBe(11);
    integrityCheck(store);
  });

  it('runs a step at least every textIndexMaxWaitMs while entries keep arriving', async () => {
    const { store, clock } = open({ textIndexRowsPerStep: 10 });
    for (let i = 0; i < 21; i++) {
      await store.ingest([entry(`k${i}`, `steady ${i}`)]);
      await clock.advance(100); // never quiet for 200 ms
    }
    // 2.1 s of steady arrivals: one step forced after 2 s.
    expect(indexState(store).mark).toBe(10);
  });

  it('indexes everything now with indexText, and not in the background when asked not to', async () => {
    const { store, clock } = open({ indexTextInBackground: false, textIndexRowsPerStep: 7 });
    await store.ingest(Array.from({ length: 30 }, (_, i) => entry(`n${i}`, `now ${i}`)));
    await clock.advance(10_000);
    expect(indexState(store).mark).toBe(0);
    expect(clock.pending).toBe(0);
    expect(await store.indexText()).toBe(30);
    expect(indexState(store)).toEqual({ mark: 30, indexed: 30 });
    expect(store.textIndexBehind()).toBe(false);
    integrityCheck(store);
  });

  it('refuses bad catch-up options with a clear error', () => {
    expect(() => ErrorStore.open(join(scratchDir(), 'x.db'), { textIndexRowsPerStep: 0 })).toThrow(/textIndexRowsPerStep must be a whole number from 1/);
    expect(() => ErrorStore.open(join(scratchDir(), 'x.db'), { textIndexIdleMs: -1 })).toThrow(/textIndexIdleMs/);
  });

  it('opens a store of schema version 4 (index kept by triggers), counts every entry there as indexed, and catches up with new ones', async () => {
    const { store: made, file } = open();
    await made.ingest([entry('v1', 'card declined')]);
    await made.indexText();
    // Back to version 4: the index filled by an insert trigger, no mark.
    made.database.exec(`DROP TRIGGER entries_text_delete; DROP TRIGGER entries_text_update; DELETE FROM meta WHERE key = 'text_indexed';
      CREATE TRIGGER entries_text_insert AFTER INSERT ON entries BEGIN
        INSERT INTO entries_text (rowid, message, error_name, message_id, key) VALUES (new.seq, new.message, new.error_name, new.message_id, new.key);
      END;
      CREATE TRIGGER entries_text_delete AFTER DELETE ON entries BEGIN
        INSERT INTO entries_text (entries_text, rowid, message, error_name, message_id, key) VALUES ('delete', old.seq, old.message, old.error_name, old.message_id, old.key);
      END;
      CREATE TRIGGER entries_text_update AFTER UPDATE OF message, error_name, message_id, key ON entries BEGIN
        INSERT INTO entries_text (entries_text, rowid, message, error_name, message_id, key) VALUES ('delete', old.seq, old.message, old.error_name, old.message_id, old.key);
        INSERT INTO entries_text (rowid, message, error_name, message_id, key) VALUES (new.seq, new.message, new.error_name, new.message_id, new.key);
      END;`);
    made.database.pragma('user_version = 4');
    stores.splice(stores.indexOf(made), 1);
    made.close();
    const v4 = new Database(file);
    v4.prepare(`INSERT INTO entries SELECT NULL, 'e-v2', error_queue, 'v2', original_queue, endpoint, host, reason, error_name, 'db timeout', top_frame, signature,
      failed_at, ingested_at, replay_count, status, retried_count, last_retried_at, last_retried_by, retried_to, outcome, outcome_at, claim, claim_until, version, headers, body, NULL, NULL FROM entries`).run();
    v4.close();

    const { store, clock } = open({}, file);
    expect(store.database.pragma('user_version', { simple: true })).toBe(ERROR_STORE_SCHEMA_VERSION);
    expect(indexState(store)).toEqual({ mark: 2, indexed: 2 });
    expect(store.textIndexBehind()).toBe(false);
    expect(found(store, 'declined')).toEqual(['v1']);
    expect(found(store, 'timeout')).toEqual(['v2']);
    await store.ingest([entry('v3', 'card declined again')]);
    expect(indexState(store)).toEqual({ mark: 2, indexed: 2 }); // no insert trigger any more
    expect(found(store, 'declined')).toEqual(['v1', 'v3']);
    await clock.advance(200);
    expect(indexState(store)).toEqual({ mark: 3, indexed: 3 });
    expect(found(store, 'declined')).toEqual(['v1', 'v3']);
    integrityCheck(store);
  });

  it('a store opened on a file with entries waiting catches up in the background', async () => {
    const { store: writer, file } = open({ indexTextInBackground: false });
    await writer.ingest([entry('w1', 'queue overflow'), entry('w2', 'queue overflow')]);
    const { store: reader, clock } = open({}, file);
    expect(found(reader, 'overflow')).toEqual(['w1', 'w2']);
    await clock.advance(200);
    expect(indexState(reader)).toEqual({ mark: 2, indexed: 2 });
    expect(found(writer, 'overflow')).toEqual(['w1', 'w2']);
  });
});
