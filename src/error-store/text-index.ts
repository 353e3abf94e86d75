/**
 * The store's full-text index (FTS5, trigram tokenizer, `entries_text`) is
 * filled outside the ingest transaction: ingest writes entries only, and the
 * index catches up with them a bounded step at a time, at quiet moments.
 * `meta.text_indexed` is the high-water mark: every entry with `seq` at or
 * below it is in the index, none above it. Text search reads the index for
 * the entries at or below the mark and the entries above it directly, with
 * the same case folding as the index, so a search finds every entry at
 * every moment. Entries are never removed from `entries`, and the triggers
 * that keep the index in step with a changed row act only on rows at or
 * below the mark (see schema.ts).
 */
import Database from 'better-sqlite3';
import type { Clock } from '../time/clock.js';
import { writeWhenFree } from '../transports/sqlite/busy.js';
import type { SqlCondition } from './filter.js';

/** The SQL function that tests the entries past the mark: `redeliver_text_has(folded needle, message, error_name, message_id, key)`. */
const HAS_TEXT = 'redeliver_text_has';

/** The mark, as a sub-select a statement reads in its own snapshot. */
const MARK = `(SELECT value FROM meta WHERE key = 'text_indexed')`;

/**
 * Folds text as the trigram tokenizer does when it matches case-insensitively:
 * each character on its own, by the tokenizer's own table (diacritics kept).
 */
export function foldText(text: string): string {
  if (ASCII.test(text)) return text.toLowerCase(); // the tokenizer folds A to Z as lower-casing does, and nothing else below U+0080
  const folds = trigramFolds();
  let folded = '';
  for (const char of text) folded += folds.get(char) ?? char;
  return folded;
}

const ASCII = /^[\x00-\x7f]*$/;

/** The characters the trigram tokenizer folds to another, read once per process. */
let folds: Map<string, string> | undefined;

/**
 * Asks SQLite's trigram tokenizer itself how it folds each character that
 * has a case (the characters JavaScript upper- or lower-cases, up to U+1FFFF,
 * which holds every cased letter): a document of the character three times
 * is one trigram, which `fts5vocab` shows folded. SQLite's table follows its
 * own Unicode version and case folding (`ſ` is `s`, `µ` is `μ`), which
 * JavaScript's lower-casing does not reproduce.
 */
function trigramFolds(): Map<string, string> {
  if (folds) return folds;
  const cased: string[] = [];
  for (let code = 0; code < 0x20000; code++) {
    if (code >= 0xd800 && code < 0xe000) continue;
    const char = String.fromCodePoint(code);
    if (char.toLowerCase() !== char || char.toUpperCase() !== char) cased.push(char);
  }
  const db = new Database(':memory:');
  try {
    db.exec(`CREATE VIRTUAL TABLE cased USING fts5(text, tokenize = 'trigram'); CREATE VIRTUAL TABLE terms USING fts5vocab(cased, 'instance');`);
    const insert = db.prepare<[number, string]>('INSERT INTO cased (rowid, text) VALUES (?, ?)');
    db.transaction(() => cased.forEach((char, i) => insert.run(i, char.repeat(3))))();
    const found = new Map<string, string>();
    for (const { doc, term } of db.prepare<[], { doc: number; term: string }>('SELECT doc, term FROM terms').all()) {
      const char = cased[doc]!;
      const folded = String.fromCodePoint(term.codePointAt(0)!);
      if (folded !== char) found.set(char, folded);
    }
    return (folds = found);
  } finally {
    db.close();
  }
}

/** Registers the SQL function the text condition uses on entries past the mark; every connection to a store file needs it. */
export function registerTextSearch(db: Database.Database): void {
  db.function(HAS_TEXT, { deterministic: true, varargs: true }, (needle: unknown, ...columns: unknown[]) => {
    for (const column of columns) if (typeof column === 'string' && foldText(column).includes(needle as string)) return 1;
    return 0;
  });
}

/**
 * The condition of a text filter of three characters or more: a phrase
 * query of the index for the entries at or below the mark, a direct
 * case-folded substring test of the same four columns for the entries above it.
 */
export function indexedTextCondition(text: string): SqlCondition {
  return {
    where: `(seq IN (SELECT rowid FROM entries_text WHERE entries_text MATCH @text)
      OR (seq > ${MARK} AND ${HAS_TEXT}(@foldedText, message, error_name, message_id, key)))`,
    params: { text: `"${text.replaceAll('"', '""')}"`, foldedText: foldText(text) },
  };
}

/**
 * Takes entries into the index past the mark, a bounded step at a time, on
 * one connection, with its statements prepared once.
 */
export class TextIndexer {
  readonly #step: () => number;
  readonly #behind: Database.Statement<[], number>;

  constructor(
    db: Database.Database,
    private readonly clock: Clock,
    /** How long a step waits for another process's write lock, ms. */
    private readonly busyTimeoutMs: number,
    /** Entries indexed per step (one transaction) at most. */
    readonly rowsPerStep: number,
  ) {
    const mark = db.prepare<[], number>(`SELECT value FROM meta WHERE key = 'text_indexed'`).pluck(true);
    const upperOf = db.prepare<[number, number], number | null>('SELECT max(seq) FROM (SELECT seq FROM entries WHERE seq > ? ORDER BY seq LIMIT ?)').pluck(true);
    const insert = db.prepare<[number, number]>(
      `INSERT INTO entries_text (rowid, message, error_name, message_id, key) SELECT seq, message, error_name, message_id, key FROM entries WHERE seq > ? AND seq <= ?`,
    );
    const moveMark = db.prepare<[number]>(`UPDATE meta SET value = ? WHERE key = 'text_indexed'`);
    this.#step = db.transaction(() => {
      const from = mark.get()!;
      const upper = upperOf.get(from, rowsPerStep);
      if (upper === null || upper === undefined) return 0;
      const indexed = insert.run(from, upper).changes;
      moveMark.run(upper);
      return indexed;
    }).immediate;
    this.#behind = db.prepare<[], number>(`SELECT coalesce(max(seq), 0) > ${MARK} FROM entries`).pluck(true);
  }

  /**
   * Indexes the next entries past the mark, at most {@link rowsPerStep} of
   * them, and moves the mark past them, in one transaction, once the write
   * lock is free. Resolves how many entries were indexed: fewer than
   * `rowsPerStep` means the index has caught up.
   */
  step(): Promise<number> {
    return writeWhenFree(this.clock, this.busyTimeoutMs, this.#step);
  }

  /** Whether entries wait past the mark. */
  behind(): boolean {
    return this.#behind.get() === 1;
  }
}

/** How many entries wait to be indexed. */
export function unindexedCount(db: Database.Database): number {
  return db.prepare<[], number>(`SELECT count(*) FROM entries WHERE seq > ${MARK}`).pluck(true).get()!;
}

/** The pause between two steps of a catch-up, ms: room for the page requests and ingests that came in during a step. */
export const TEXT_INDEX_STEP_GAP_MS = 10;

/** Options of {@link TextIndexCatchUp}. */
export interface TextIndexCatchUpOptions {
  /** What runs the steps. */
  readonly indexer: TextIndexer;
  readonly clock: Clock;
  /** Quiet time after the last ingest before a step runs, ms. */
  readonly idleMs: number;
  /** The longest the index waits for a quiet moment while entries keep arriving: after this long without a step, one runs anyway, ms. */
  readonly maxWaitMs: number;
  /** Called when a step fails (the next one tries again). */
  readonly onError: (error: unknown) => void;
}

/**
 * Runs {@link TextIndexer.step} in the background until the index has
 * caught up: each step waits for `idleMs` without an ingest (or `maxWaitMs`
 * since the last step), indexes at most `rowsPerStep` entries in one transaction,
 * and pauses {@link TEXT_INDEX_STEP_GAP_MS} before the next, so neither an
 * ingest nor a page request waits behind more than one step. Timed by the
 * store's clock.
 */
export class TextIndexCatchUp {
  readonly #options: TextIndexCatchUpOptions;
  readonly #stopped = new AbortController();
  #lastWrite: number;
  #lastStep: number;
  /** When the last step ended, or -infinity before the first. */
  #stepEnded = -Infinity;
  #running: Promise<void> | undefined;
  #steps = 0;

  constructor(options: TextIndexCatchUpOptions) {
    this.#options = options;
    this.#lastWrite = this.#lastStep = options.clock.monotonic();
  }

  /** Steps run so far. */
  get steps(): number {
    return this.#steps;
  }

  /** Resolves when the current catch-up (if any) has finished or stopped. */
  get settled(): Promise<void> {
    return this.#running ?? Promise.resolve();
  }

  /** Records that entries were just written and starts catching up if it is not already. */
  written(): void {
    this.#lastWrite = this.#options.clock.monotonic();
    this.start();
  }

  /** Starts catching up unless it is already running or stopped. */
  start(): void {
    if (this.#running || this.#stopped.signal.aborted) return;
    this.#running = this.#loop().finally(() => {
      this.#running = undefined;
    });
  }

  /** Stops at the next wait; a step under way finishes first (it is synchronous). */
  stop(): void {
    this.#stopped.abort();
  }

  async #loop(): Promise<void> {
    const { indexer, clock, idleMs, maxWaitMs } = this.#options;
    const signal = this.#stopped.signal;
    for (;;) {
      const now = clock.monotonic();
      const due = Math.max(Math.min(this.#lastWrite + idleMs, this.#lastStep + maxWaitMs), this.#stepEnded + TEXT_INDEX_STEP_GAP_MS);
      const wait = Math.max(0, due - now);
      try {
        await clock.sleep(wait, signal);
      } catch {
        return;
      }
      const at = clock.monotonic();
      if (at - this.#lastWrite < idleMs && at - this.#lastStep < maxWaitMs) continue;
      let indexed: number;
      try {
        indexed = await indexer.step();
      } catch (error) {
        if (signal.aborted) return;
        this.#options.onError(error);
        try {
          await clock.sleep(idleMs, signal);
        } catch {
          return;
        }
        continue;
      }
      this.#steps++;
      this.#lastStep = this.#stepEnded = clock.monotonic();
      if (indexed < indexer.rowsPerStep) return;
    }
  }
}
