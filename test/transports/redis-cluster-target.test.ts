/**
 * A cluster url names its seeds, credentials and TLS; a single server's url
 * is not a cluster; a cluster url that cannot work is a RangeError naming
 * the problem (and never the password). The hash slot of a key is the
 * cluster's (values from the Redis Cluster specification; the cluster tests compare it with `CLUSTER KEYSLOT`).
 */
import { describe, expect, it } from 'vitest';
import { keySlot } from '../../src/transports/redis/cluster.js';
import { resolveRedisOptions } from '../../src/transports/redis/options.js';
import { parseClusterTarget } from '../../src/transports/redis/target.js';

describe('a Redis Cluster url', () => {
  it('is several seeds separated by commas, a port defaulting to 6379', () => {
    expect(parseClusterTarget('redis://10.0.0.1:7000,10.0.0.2,[::1]:7002')).toEqual({
      seeds: [
        { host: '10.0.0.1', port: 7000 },
        { host: '10.0.0.2', port: 6379 },
        { host: '::1', port: 7002 },
      ],
      username: undefined,
      password: undefined,
      tls: false,
    });
  });

  it('is one seed with ?cluster=1, with credentials for every node and TLS for rediss://', () => {
    expect(parseClusterTarget('rediss://ops:s%40cret@cache.internal:7000/?cluster=1')).toEqual({
      seeds: [{ host: 'cache.internal', port: 7000 }],
      username: 'ops',
      password: 's@cret',
      tls: true,
    });
    expect(parseClusterTarget('redis://:pw@a:1,b:2/0')?.password).toBe('pw');
  });

  it('is not a single server url', () => {
    expect(parseClusterTarget('redis://127.0.0.1:6379')).toBeUndefined();
    expect(parseClusterTarget('redis://user:pw@127.0.0.1:6379/2?password=x')).toBeUndefined();
    expect(resolveRedisOptions({ url: 'redis://127.0.0.1:6379' }).cluster).toBeUndefined();
    expect(resolveRedisOptions({ url: 'redis://a:1,b:2' }).cluster?.seeds).toHaveLength(2);
  });

  it('refuses what a cluster cannot be, naming it and hiding the password', () => {
    expect(() => parseClusterTarget('redis://a:1,b:2/3')).toThrow(/only database 0/);
    expect(() => parseClusterTarget('redis://a:1?cluster=yes')).toThrow(/cluster must be 1 or true/);
    expect(() => parseClusterTarget('redis://a:1,b:2?db=1')).toThrow(/unknown parameter "db"/);
    expect(() => parseClusterTarget('redis://a:1,b:99999')).toThrow(/port 99999/);
    expect(() => parseClusterTarget('redis://a:1,,b:2')).toThrow(/is not a host/);
    expect(() => parseClusterTarget('redis://ops:hunter2@a:1,b:x')).toThrow(RangeError);
    try {
      parseClusterTarget('redis://ops:hunter2@a:1,b:x');
    } catch (error) {
      expect((error as Error).message).not.toContain('hunter2');
    }
    expect(() => resolveRedisOptions({ url: 'redis://a:1,b:2/5' })).toThrow(RangeError);
  });
});

describe('the hash slot of a key', () => {
  it('is the cluster\'s, from the hash tag when there is one', () => {
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('123456789')).toBe(12739);
    expect(keySlot('{user1000}.following')).toBe(keySlot('user1000'));
    expect(keySlot('{redeliver}:q:orders')).toBe(keySlot('{redeliver}:queues'));
    expect(keySlot('somekey')).toBe(11058);
    // An empty tag is no tag: the whole key is hashed. Only the first { and the } after it count.
    expect(keySlot('foo{}{bar}')).not.toBe(keySlot('bar'));
    expect(keySlot('foo{{bar}}zap')).toBe(keySlot('{bar'));
  });
});
