/**
 * How one replica's memory follows the others' commits (issue 13, §10.2, §10.10.2): a change
 * notice clears the hot cache, a lookup in flight across it keeps nothing, nothing is cached
 * while notices may be lost, and notification streams look again for the approvals named (or all
 * of them, once listening resumes).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { deriveCatalog } from '../../../src/openapi/derive.js';
import { defaultPolicy } from '../../../src/policy/policy.js';
import { createContext, type ProtocolContext } from '../../../src/protocol/context.js';
import { cachedGrants, loadGrants } from '../../../src/protocol/grants.js';
import { replicaChangeHandlers } from '../../../src/protocol/replica-changes.js';
import { openSqliteStore } from '../../../src/storage/open-sqlite.js';
import type { Store } from '../../../src/storage/types.js';

const stores: Store[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

function context(): ProtocolContext {
  const store = openSqliteStore({ file: ':memory:' });
  stores.push(store);
  const catalog = deriveCatalog([
    { source: 'empty.yaml', doc: { openapi: '3.0.3', info: { title: 'empty', version: '1' }, paths: {} } },
  ]);
  return createContext({
    store,
    catalog,
    policy: defaultPolicy(catalog),
    clock: { now: () => 1_800_000_000_000 },
    logger: silentLogger,
    issuer: () => 'http://127.0.0.1:1',
  });
}

describe('replica change notices', () => {
  it('clear the hot cache; a lookup read across one is not kept', async () => {
    const ctx = context();
    const handlers = replicaChangeHandlers(ctx);
    await loadGrants(ctx, 'agt_1');
    expect(cachedGrants(ctx, 'agt_1')).toEqual([]);
    handlers.onNotice({ origin: 'other', cache: false, approvals: [] });
    expect(cachedGrants(ctx, 'agt_1')).toEqual([]);
    handlers.onNotice({ origin: 'other', cache: true, approvals: [] });
    expect(cachedGrants(ctx, 'agt_1')).toBeUndefined();
    const reading = loadGrants(ctx, 'agt_1');
    handlers.onNotice({ origin: 'other', cache: true, approvals: [] });
    await reading;
    expect(cachedGrants(ctx, 'agt_1')).toBeUndefined();
  });

  it('while they may be lost nothing is cached; once listening again, every stream looks again', async () => {
    const ctx = context();
    const handlers = replicaChangeHandlers(ctx);
    const heard: string[] = [];
    for (const id of ['apr_1', 'apr_2']) ctx.approvalEvents.subscribe(id, () => heard.push(id));
    await loadGrants(ctx, 'agt_1');
    handlers.onDown(new Error('the listening connection closed'));
    expect(cachedGrants(ctx, 'agt_1')).toBeUndefined();
    await loadGrants(ctx, 'agt_1');
    expect(cachedGrants(ctx, 'agt_1')).toBeUndefined();
    handlers.onUp();
    expect(heard.sort()).toEqual(['apr_1', 'apr_2']);
    await loadGrants(ctx, 'agt_1');
    expect(cachedGrants(ctx, 'agt_1')).toEqual([]);

    heard.length = 0;
    handlers.onNotice({ origin: 'other', cache: false, approvals: ['apr_2', 'apr_9'] });
    expect(heard).toEqual(['apr_2']);
    handlers.onNotice({ origin: 'other', cache: false, approvals: 'all' });
    expect(heard.sort()).toEqual(['apr_1', 'apr_2', 'apr_2']);
  });
});
