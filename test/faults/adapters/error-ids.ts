import type { Transport } from '../../../src/transport/types.js';

/** The message ids in `errorQueue`, browsed page by page through the transport's error-queue operations. */
export async function browseErrorIds(transport: Transport, errorQueue: string): Promise<string[]> {
  const operations = transport.errorQueue;
  if (!operations) throw new Error(`the transport has no error-queue operations to read ${errorQueue}`);
  const ids: string[] = [];
  for (let offset = 0; ; offset += 500) {
    const page = await operations.browse(errorQueue, { offset, limit: 500 });
    ids.push(...page.map((entry) => entry.messageId));
    if (page.length < 500) return ids;
  }
}
