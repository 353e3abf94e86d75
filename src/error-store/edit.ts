/**
 * Edit and retry: send an edited copy of one stored entry (new body and/or
 * headers, the same message id), mark the original `replaced`, and record
 * the edit (who, when, the request id, what changed). The request id makes
 * a repeated request (a double click, a command run twice, the same edit
 * from two processes) send nothing: the edit is recorded before it is sent.
 */
import { createHash } from 'node:crypto';
import { replayHeaders } from '../headers/replay.js';
import { HEADER_PREFIX } from '../headers/names.js';
import { userHeaders } from '../headers/retry-state.js';
import type { QueueKind } from '../transport/inspection.js';
import type { Headers } from '../transport/types.js';
import { destinationOf, type RetryContext } from './send-back.js';

/** An edit of one entry. */
export interface EditRequest {
  /** The new body. Default the entry's body. */
  readonly body?: Uint8Array;
  /** The new headers, replacing the entry's headers entirely (drop a header by leaving it out). Default the entry's headers. */
  readonly headers?: Record<string, string>;
  /** Who edited. */
  readonly by: string;
  /** Names this edit: a second request with the same id sends nothing. */
  readonly requestId: string;
}

/** What an edit did. */
export interface EditResult {
  /** Where the edited copy went. */
  readonly sentTo: string;
  readonly messageId: string;
  /** True when this request id was seen before: nothing was sent this time. */
  readonly duplicate: boolean;
}

/** A recorded edit. */
export interface EditRecord {
  readonly requestId: string;
  readonly key: string;
  readonly by: string;
  readonly at: number;
  readonly sentTo: string;
  readonly messageId: string;
  readonly bodySizeBefore: number;
  readonly bodySizeAfter: number;
  /** The user's headers added, removed or changed (redeliver's own are rewritten on every send-back): name to [before, after], null when absent. */
  readonly changedHeaders: Readonly<Record<string, readonly [string | null, string | null]>>;
  /** The bodies, when at most {@link SMALL_BODY} bytes and the body changed. */
  readonly bodyBefore?: Uint8Array;
  readonly bodyAfter?: Uint8Array;
}

/** Bodies up to this size are kept in the edit record, bytes. */
export const SMALL_BODY = 4_096;

/** A request id derived from an entry key and the edit's content: the same edit of the same entry gives the same id. */
export function editRequestId(key: string, body: Uint8Array | undefined, headers: Record<string, string> | undefined): string {
  const hash = createHash('sha256').update(key).update('\0');
  hash.update(body ?? new Uint8Array()).update('\0').update(JSON.stringify(headers === undefined ? null : Object.entries(headers).sort()));
  return `edit-${hash.digest('hex').slice(0, 32)}`;
}

interface EditRow {
  request_id: string;
  key: string;
  by: string;
  at: number;
  sent_to: string;
  message_id: string;
  body_size_before: number;
  body_size_after: number;
  changed_headers: string;
  body_before: Buffer | null;
  body_after: Buffer | null;
  state: 'sending' | 'sent' | 'failed';
  until: number | null;
  error: string | null;
}

/** The edits sent of one entry (or all, newest first, when no key). */
export function listEdits(context: Pick<RetryContext, 'store'>, key?: string): EditRecord[] {
  const db = context.store.database;
  const rows =
    key === undefined
      ? db.prepare<[], EditRow>(`SELECT * FROM edits WHERE state = 'sent' ORDER BY at DESC LIMIT 1000`).all()
      : db.prepare<[string], EditRow>(`SELECT * FROM edits WHERE key = ? AND state = 'sent' ORDER BY at`).all(key);
  return rows.map(recordOf);
}

/** How often a second submission of a request id reads the first one's record while it is being sent, ms. */
const WAIT_POLL_MS = 50;

/**
 * See {@link RetryJobs.editAndRetry}. The edit is recorded (`sending`,
 * together with the claim on the entry) before the copy is sent, so a
 * second submission of its request id, in any process, sends nothing: it
 * waits for the first one's outcome and answers with it. A record left
 * `sending` past the claim (its process died) or `failed` is taken over by
 * the next submission. `attemptId` names this attempt's claim.
 */
export async function editAndRetry(
  context: RetryContext,
  key: string,
  edit: EditRequest,
  options: { to?: string; allowedQueues?: readonly string[] },
  attemptId: string,
): Promise<EditResult> {
  checkEdit(edit);
  const { store, transport, clock, logger } = context;
  const db = store.database;
  const seen = db.prepare<[string], EditRow>('SELECT * FROM edits WHERE request_id = ?');
  const answer = (row: EditRow): EditResult => {
    if (row.key !== key) throw new RangeError(`request id ${edit.requestId} was used for entry ${row.key}, not ${key}`);
    return { sentTo: row.sent_to, messageId: row.message_id, duplicate: true };
  };
  const earlier = seen.get(edit.requestId);
  if (earlier?.state === 'sent') return answer(earlier);
  const entry = store.get(key);
  if (!entry) throw new RangeError(`no entry ${key} in the store`);
  const body = edit.body ?? entry.body;
  const headers: Headers = edit.headers === undefined ? { ...entry.headers } : editedHeaders(entry.headers, edit.headers);
  const destination = await destinationOf(transport, entry, options.to, options.allowedQueues, new Map<string, QueueKind>());
  const changed = headerChanges(userHeaders(entry.headers), userHeaders(headers));
  const bodyChanged = !Buffer.from(body).equals(Buffer.from(entry.body));
  const small = bodyChanged && entry.body.byteLength <= SMALL_BODY && body.byteLength <= SMALL_BODY;
  const claimant = `edit:${attemptId}`;
  const record = db.prepare(
    `INSERT INTO edits (request_id, key, by, at, sent_to, message_id, body_size_before, body_size_after, changed_headers, body_before, body_after, state, until)
     VALUES (@requestId, @key, @by, @at, @sentTo, @messageId, @sizeBefore, @sizeAfter, @changed, @bodyBefore, @bodyAfter, 'sending', @until)
     ON CONFLICT (request_id) DO UPDATE SET by = @by, at = @at, sent_to = @sentTo, body_size_after = @sizeAfter, changed_headers = @changed,
       body_before = @bodyBefore, body_after = @bodyAfter, state = 'sending', until = @until, error = NULL`,
  );
  // Record and claim, or find another submission of this request id at work and wait for its outcome.
  for (;;) {
    const taken = await store.write((version) => {
      const now = clock.now();
      const row = seen.get(edit.requestId);
      if (row?.state === 'sent' || (row?.state === 'sending' && row.until !== null && row.until > now)) return row;
      if (row && row.key !== key) return row;
      const current = store.get(key)!;
      if (current.status !== 'failed' && current.status !== 'retrying') {
        throw new Error(`entry ${key} is ${current.status}${current.lastRetriedBy ? ` (by ${current.lastRetriedBy})` : ''}: only a failed entry can be edited and retried`);
      }
      const until = now + context.claimMs;
      if (store.claimWithin([key], claimant, until, version).length === 0) throw new Error(`entry ${key} is being retried by someone else; nothing sent`);
      record.run({
        requestId: edit.requestId,
        key,
        by: edit.by,
        at: now,
        sentTo: destination,
        messageId: entry.messageId,
        sizeBefore: entry.body.byteLength,
        sizeAfter: body.byteLength,
        changed: JSON.stringify(changed),
        bodyBefore: small ? Buffer.from(entry.body) : null,
        bodyAfter: small ? Buffer.from(body) : null,
        until,
      });
      return undefined;
    });
    if (taken === undefined) break;
    if (taken.state === 'sent' || taken.key !== key) return answer(taken);
    const outcome = await waitForOutcome(context, edit.requestId);
    if (outcome?.state === 'sent') return answer(outcome);
    if (outcome?.state === 'failed') throw new Error(`the same edit (request id ${edit.requestId}) was just tried and failed: ${outcome.error}; nothing sent`);
  }
  try {
    await transport.send(destination, { id: entry.messageId, body, headers: replayHeaders(headers, new Date(clock.now())) });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    await store
      .write((version) => {
        db.prepare(`UPDATE entries SET status = 'failed', claim = NULL, claim_until = NULL, version = ? WHERE key = ? AND status = 'retrying' AND claim = ?`).run(version, key, claimant);
        db.prepare(`UPDATE edits SET state = 'failed', until = NULL, error = ? WHERE request_id = ?`).run(message, edit.requestId);
      })
      .catch((recordError: unknown) => logger.error({ key, requestId: edit.requestId, err: recordError }, 'could not record a failed edit; it is taken over when its claim runs out'));
    throw error;
  }
  const marked = await store.markRetriedMany([key], claimant, { queue: destination, by: edit.by }, 'replaced', () => {
    db.prepare(`UPDATE edits SET state = 'sent', until = NULL, at = ? WHERE request_id = ?`).run(clock.now(), edit.requestId);
  });
  if (marked.length === 0) logger.warn({ key, requestId: edit.requestId }, 'edited copy sent, but the claim ran out first: another retry may have sent the original too');
  logger.info({ key, requestId: edit.requestId, by: edit.by, queue: destination, changedHeaders: Object.keys(changed), bodyChanged }, 'edited copy sent back');
  return { sentTo: destination, messageId: entry.messageId, duplicate: false };
}

/** Reads the record of a request id being sent by another submission until it is sent or failed, or its claim ran out (undefined: take it over). */
async function waitForOutcome(context: RetryContext, requestId: string): Promise<EditRow | undefined> {
  const seen = context.store.database.prepare<[string], EditRow>('SELECT * FROM edits WHERE request_id = ?');
  for (;;) {
    const row = seen.get(requestId);
    if (row === undefined || row.state !== 'sending' || row.until === null || row.until <= context.clock.now()) return row?.state === 'sending' ? undefined : row;
    await context.clock.sleep(WAIT_POLL_MS);
  }
}

function checkEdit(edit: EditRequest): void {
  if (typeof edit !== 'object' || edit === null) throw new RangeError('the edit must be an object');
  if (typeof edit.by !== 'string' || edit.by.trim() === '') throw new RangeError('edit.by must name who edited');
  if (typeof edit.requestId !== 'string' || edit.requestId === '' || edit.requestId.length > 200) throw new RangeError('edit.requestId must be 1 to 200 characters');
  if (edit.body === undefined && edit.headers === undefined) throw new RangeError('an edit changes the body, the headers or both');
  if (edit.body !== undefined && !(edit.body instanceof Uint8Array)) throw new RangeError('edit.body must be a Uint8Array');
  if (edit.headers !== undefined && (typeof edit.headers !== 'object' || edit.headers === null || Object.values(edit.headers).some((v) => typeof v !== 'string'))) {
    throw new RangeError('edit.headers must map header names to strings');
  }
}

/**
 * The headers an edit sends: the user's headers as the edit gives them, and
 * redeliver's own (`redeliver-*`) as the entry has them, which an edit may
 * not change (a forged `redeliver-replay-count` would carry on in the copy).
 * Throws a RangeError for a `redeliver-*` header the edit adds or changes;
 * one it leaves out is kept.
 */
function editedHeaders(entry: Readonly<Headers>, edit: Readonly<Record<string, string>>): Headers {
  const own = Object.keys(edit).filter((name) => name.toLowerCase().startsWith(HEADER_PREFIX) && edit[name] !== (Object.hasOwn(entry, name) ? entry[name] : undefined));
  if (own.length > 0) throw new RangeError(`an edit cannot set redeliver's own headers (${own.join(', ')}): they are rewritten on every send-back`);
  const headers = userHeaders(edit);
  for (const name of Object.keys(entry)) if (name.startsWith(HEADER_PREFIX) && typeof entry[name] === 'string') headers[name] = entry[name]!;
  return headers;
}

function headerChanges(before: Readonly<Headers>, after: Readonly<Headers>): Record<string, [string | null, string | null]> {
  const changed: Record<string, [string | null, string | null]> = {};
  for (const name of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const a = Object.hasOwn(before, name) ? before[name]! : null;
    const b = Object.hasOwn(after, name) ? after[name]! : null;
    if (a !== b) changed[name] = [a, b];
  }
  return changed;
}

function recordOf(row: EditRow): EditRecord {
  return {
    requestId: row.request_id,
    key: row.key,
    by: row.by,
    at: row.at,
    sentTo: row.sent_to,
    messageId: row.message_id,
    bodySizeBefore: row.body_size_before,
    bodySizeAfter: row.body_size_after,
    changedHeaders: JSON.parse(row.changed_headers) as EditRecord['changedHeaders'],
    ...(row.body_before === null ? {} : { bodyBefore: new Uint8Array(row.body_before) }),
    ...(row.body_after === null ? {} : { bodyAfter: new Uint8Array(row.body_after) }),
  };
}
