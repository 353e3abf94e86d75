/**
 * Where a partition scenario's client processes run on the suite's network (network.ts):
 * the producers and the odd workers in the first client member, the even
 * workers in the second, so a split can put one worker on each side.
 */

/** The client members' names. */
export const CLIENT_MEMBERS = ['c1', 'c2'] as const;

/** The client member a process of `role` (`producer-1`, `worker-2`) runs in. */
export function clientMemberOf(role: string): string {
  const worker = /^worker-(\d+)$/.exec(role);
  return worker && Number(worker[1]) % 2 === 0 ? CLIENT_MEMBERS[1] : CLIENT_MEMBERS[0];
}
