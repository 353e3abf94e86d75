/** How `nsq://` targets read: nsqd, its HTTP API, nsqlookupd. */
import { describe, expect, it } from 'vitest';
import { parseNsqTarget } from '../../src/cli/nsq-target.js';
import { UsageError } from '../../src/cli/open-transport.js';

describe('nsq:// targets', () => {
  it('reads one nsqd, its HTTP port or address, and lookupd addresses', () => {
    expect(parseNsqTarget('nsq://127.0.0.1:4150')).toEqual({ nsqd: ['127.0.0.1:4150'], lookupd: [], httpAddresses: {} });
    expect(parseNsqTarget('nsq://nsq.local')).toEqual({ nsqd: ['nsq.local:4150'], lookupd: [], httpAddresses: {} });
    expect(parseNsqTarget('nsq://127.0.0.1:4150?http=4999')).toEqual({ nsqd: ['127.0.0.1:4150'], lookupd: [], httpAddresses: { '127.0.0.1:4150': '127.0.0.1:4999' } });
    expect(parseNsqTarget('nsq://10.0.0.1:4150?http=gw:80&lookupd=l1:4161&lookupd=l2:4161')).toEqual({
      nsqd: ['10.0.0.1:4150'],
      lookupd: ['l1:4161', 'l2:4161'],
      httpAddresses: { '10.0.0.1:4150': 'gw:80' },
    });
    expect(parseNsqTarget('nsq://?lookupd=127.0.0.1:4161')).toEqual({ nsqd: [], lookupd: ['127.0.0.1:4161'], httpAddresses: {} });
  });

  it('refuses what it cannot read, saying why', () => {
    for (const [target, why] of [
      ['nsq://', 'needs an nsqd host or a lookupd='],
      ['nsq://h:4150?http=99999', 'is not a port'],
      ['nsq://h:4150?lookupd=nohost', 'is not a host:port address'],
      ['nsq://h:4150?channel=x', 'unknown option channel'],
      ['nsq://u:p@h:4150', 'takes no user or password'],
    ] as const) {
      expect(() => parseNsqTarget(target)).toThrow(UsageError);
      expect(() => parseNsqTarget(target)).toThrow(why);
    }
  });
});
