import { createHash } from 'node:crypto';
import type { RedisClient } from '../cluster.js';

/** A Lua script. */
export interface Script {
  /** For error messages. */
  readonly name: string;
  readonly lua: string;
}

/**
 * Runs scripts by their SHA1 (`EVALSHA`), sending the source once when the
 * server does not know it yet (after a restart or a `SCRIPT FLUSH`). It does
 * not define commands on the client, so a client the user passed in is left
 * as it was.
 */
export class ScriptRunner {
  readonly #shas = new Map<Script, string>();

  constructor(readonly client: RedisClient) {}

  /** Runs `script` and returns its reply, bulk strings as Buffers. */
  async run(script: Script, keys: readonly string[], args: readonly (string | number | Buffer | Uint8Array)[]): Promise<unknown> {
    const sha = this.#sha(script);
    const flat = args.map((a) => (a instanceof Uint8Array && !Buffer.isBuffer(a) ? Buffer.from(a.buffer, a.byteOffset, a.byteLength) : a)) as (string | number | Buffer)[];
    try {
      return await this.client.callBuffer('EVALSHA', sha, keys.length, ...keys, ...flat);
    } catch (error) {
      if (!/NOSCRIPT/.test((error as Error)?.message ?? '')) throw error;
      return this.client.callBuffer('EVAL', script.lua, keys.length, ...keys, ...flat);
    }
  }

  #sha(script: Script): string {
    let sha = this.#shas.get(script);
    if (sha === undefined) {
      sha = createHash('sha1').update(script.lua).digest('hex');
      this.#shas.set(script, sha);
    }
    return sha;
  }
}
