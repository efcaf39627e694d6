/**
 * §2.12 drift on the upgrade past issue #14 (components moved from inlined copies to `$defs`):
 * grants stamped by the inlining build keep their capability's version and stay active; only a
 * grant whose capability really changed is suspended.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { loadCatalog } from '../../../src/openapi/load-catalog.js';
import { defaultPolicy } from '../../../src/policy/policy.js';
import { createContext } from '../../../src/protocol/context.js';
import { applyDrift } from '../../../src/protocol/drift.js';
import { openSqliteStore } from '../../../src/storage/open-sqlite.js';
import type { Store } from '../../../src/storage/types.js';
import { agent as agentRecord, grant, host as hostRecord } from '../storage/store-fixtures.js';

const SPECS = fileURLToPath(new URL('../../fixtures/specs/version/', import.meta.url));
const NOW = 1_700_000_000_000;
const FILE = 'legacy-30.yaml';
const fixture = JSON.parse(readFileSync(`${SPECS}pre-14-versions.json`, 'utf8')) as {
  specs: Record<string, Record<string, string>>;
};
/** Versions the inlining build stamped on grants of legacy-30.yaml's capabilities. */
const stamped = fixture.specs[FILE] as Record<string, string>;

const stores: Store[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

describe('drift on the upgrade from the inlined layout (§2.12, issue #14)', () => {
  it('suspends no grant stamped by the inlining build; a changed capability still is', async () => {
    const store = openSqliteStore({ file: ':memory:' });
    stores.push(store);
    const catalog = await loadCatalog([{ spec: `${SPECS}${FILE}`, id: FILE }], {
      allowRemoteRefs: false,
      allowHttp: false,
    });
    const ctx = createContext({
      store,
      catalog,
      policy: defaultPolicy(catalog),
      clock: { now: () => NOW },
      logger: silentLogger,
      issuer: () => 'http://127.0.0.1:1',
    });
    const names = Object.keys(stamped);
    expect(names.length).toBeGreaterThan(1);
    const agent = agentRecord('agt_1', 'hst_1');
    await ctx.write(async (tx) => {
      await tx.insertHost(hostRecord('hst_1'));
      await tx.insertAgent(agent);
      for (const [i, capability] of names.entries()) {
        await tx.putGrant(
          grant(`grt_${i}`, agent.id, {
            capability,
            status: 'active',
            constraints: null,
            proposedConstraints: null,
            approvedConstraints: null,
            expiresAt: null,
            // The last one was approved at some other version of its capability: a real change.
            capabilityVersion: i === names.length - 1 ? 'approved-at-another' : stamped[capability],
          }),
        );
      }
    });

    const outcome = await applyDrift(ctx);

    const changed = names[names.length - 1] as string;
    expect(outcome).toEqual({ suspended: new Map([[changed, 1]]), ungranted: new Map(), adopted: 0 });
    const grants = await store.grants(agent.id);
    expect(Object.fromEntries(grants.map((g) => [g.capability, g.status]))).toEqual(
      Object.fromEntries(names.map((n) => [n, n === changed ? 'pending' : 'active'])),
    );
  });
});
