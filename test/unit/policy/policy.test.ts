/** The policy file: schema, defaults, resolution against the catalog, and every operator mistake as a clear UserError. */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userError } from '../../helpers/user-error.js';
import type { Catalog } from '../../../src/openapi/catalog.js';
import { loadCatalog } from '../../../src/openapi/load-catalog.js';
import { defaultPolicy, loadPolicyFile, parsePolicy, type Policy } from '../../../src/policy/policy.js';
import { POLICY_SCHEMA } from '../../../src/policy/schema.js';
import { PETSTORE, ROOT } from '../../helpers/proxy.js';
import { NON_CANONICAL_KEYS, SMALL_ORDER_KEYS } from '../../helpers/weak-keys.js';
import { newKeyPair } from '../../../src/util/key-pair.js';

const FILE = 'policy.yaml';
const ALL = ['create_pet', 'delete_pet', 'get_inventory', 'get_pet', 'list_pets', 'place_order'];

let catalog: Catalog;
let dir = '';
beforeAll(async () => {
  catalog = await loadCatalog([{ spec: PETSTORE }], { allowRemoteRefs: false, allowHttp: false });
  dir = mkdtempSync(join(tmpdir(), 'aap-policy-test-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const parse = (yaml: string): Policy => parsePolicy(yaml, FILE, catalog);

/** Runs `fn`, which must throw a UserError, and returns its message lines. */
function errorLines(fn: () => unknown): string[] {
  return userError(fn).message.split('\n');
}

const failures = (yaml: string): string[] => errorLines(() => parse(yaml));

function publicX(): string {
  const jwk = newKeyPair('ed25519').publicKey.export({ format: 'jwk' });
  return jwk.x as string;
}

const sorted = (set: ReadonlySet<string>): string[] => [...set].sort();

describe('config/policy.example.yaml', () => {
  it('loads against the petstore catalog with the values it documents', () => {
    const policy = loadPolicyFile(join(ROOT, 'config/policy.example.yaml'), catalog);
    expect(catalog.capabilities.map((c) => c.name)).toEqual(ALL);
    expect(policy.modes).toEqual(['delegated', 'autonomous']);
    expect(policy.approval).toEqual({
      methods: ['device_authorization', 'ciba'],
      expiresInMs: 600_000,
      intervalMs: 5_000,
      approvers: ['alice@example.com'],
      verificationUri: null,
      requirePresence: 'data_changing',
      warnNames: ['Acme Pets'],
      perCallExpiresInMs: 300_000,
      perCallMaxResultBytes: 262_144,
    });
    expect(policy.lifetimes).toEqual({
      sessionTtlMs: 30 * 60_000,
      maxLifetimeMs: 24 * 3_600_000,
      absoluteLifetimeMs: 30 * 86_400_000,
      maxJwtLifetimeSec: 60,
      clockSkewSec: 30,
      pendingCleanupMs: 24 * 3_600_000,
    });
    // get_* also matches get_inventory, which is blocked, so it is not a default.
    expect(sorted(policy.defaults)).toEqual(['get_pet', 'list_pets']);
    expect(sorted(policy.highRisk)).toEqual(['delete_pet', 'place_order']);
    expect(sorted(policy.blocked)).toEqual(['get_inventory']);
    expect(sorted(policy.perCall)).toEqual(['place_order']);
    expect(sorted(policy.public)).toEqual(['get_pet', 'list_pets']);
    expect(Object.fromEntries(policy.constraints)).toEqual({
      place_order: { quantity: { min: 1, max: 10 } },
      list_pets: { limit: { max: 100 } },
    });
    expect(sorted(policy.autonomousGrants)).toEqual(['get_pet', 'list_pets']);
    expect(policy.hosts).toEqual([
      {
        name: 'ci-runner',
        publicJwk: { kty: 'OKP', crv: 'Ed25519', x: 'PAZBByIbfAAxn0GdS136vFgWzJR363kmnlVj1OANRHc' },
        userId: 'alice@example.com',
        defaultCapabilities: ['create_pet'],
      },
    ]);
    expect(policy.rateLimits).toEqual({
      perAgent: { count: 600, windowMs: 60_000 },
      perHost: { count: 1200, windowMs: 60_000 },
      perUser: { count: 3000, windowMs: 60_000 },
      perIp: { count: 120, windowMs: 60_000 },
      unknownHostRegistration: { count: 20, windowMs: 600_000 },
      approvalRequestsPerUser: { count: 5, windowMs: 60_000 },
      failedAuthPerIp: { count: 60, windowMs: 60_000 },
      perCapability: new Map([
        [
          'place_order',
          {
            global: { count: 10, windowMs: 3_600_000 },
            perAgent: { count: 2, windowMs: 3_600_000 },
            perHost: null,
            perUser: { count: 5, windowMs: 3_600_000 },
          },
        ],
        [
          'delete_pet',
          { global: { count: 20, windowMs: 3_600_000 }, perAgent: null, perHost: null, perUser: null },
        ],
      ]),
      // The example's high-risk capabilities (delete_pet, place_order) each have their own entry.
      highRisk: { global: null, perAgent: { count: 60, windowMs: 60_000 }, perHost: null, perUser: null },
      inFlight: { perAgent: 16, perHost: 64, total: 256 },
    });
    expect(policy.capabilityRequests).toEqual({
      maxEntries: 100,
      maxConstraintBytes: 8192,
      maxConstraintDepth: 8,
    });
    expect(policy.pendingHosts).toEqual({ maxHosts: 1000, maxAgents: 10, maxOpenApprovals: 10 });
    expect(policy.replay).toEqual({ maxEntries: 200_000, maxEntriesPerIdentity: 2000 });
    expect(policy.audit).toEqual({ logArguments: false });
  });

  it('documents every key of the schema', () => {
    const documented = readFileSync(join(ROOT, 'config/policy.example.yaml'), 'utf8');
    type Node = { properties?: Record<string, Node>; items?: Node };
    for (const [section, sub] of Object.entries(POLICY_SCHEMA.properties) as [string, Node][]) {
      expect(documented, section).toMatch(new RegExp(`^${section}:`, 'm'));
      for (const key of Object.keys((sub.items ?? sub).properties ?? {}))
        expect(documented, `${section}.${key}`).toMatch(new RegExp(`^\\s+(- )?${key}:`, 'm'));
    }
  });
});

describe('config/policy.schema.json', () => {
  it('is the generated form of src/policy/schema.ts', () => {
    expect(JSON.parse(readFileSync(join(ROOT, 'config/policy.schema.json'), 'utf8'))).toEqual(POLICY_SCHEMA);
  });
});

const HIGH_RISK_DEFAULT = {
  global: null,
  perAgent: { count: 60, windowMs: 60_000 },
  perHost: null,
  perUser: null,
};

describe('defaults', () => {
  it('fills every schema default into an empty file', () => {
    for (const text of ['', '{}', '# nothing\n']) {
      const policy = parse(text);
      expect(policy.modes).toEqual(['delegated']);
      expect(policy.approval).toEqual({
        methods: ['device_authorization'],
        expiresInMs: 600_000,
        intervalMs: 5_000,
        approvers: [],
        verificationUri: null,
        requirePresence: 'data_changing',
        warnNames: [],
        perCallExpiresInMs: 300_000,
        perCallMaxResultBytes: 262_144,
      });
      expect(policy.lifetimes).toEqual({
        sessionTtlMs: 1_800_000,
        maxLifetimeMs: 86_400_000,
        absoluteLifetimeMs: 2_592_000_000,
        maxJwtLifetimeSec: 60,
        clockSkewSec: 30,
        pendingCleanupMs: 86_400_000,
      });
      for (const set of [
        policy.defaults,
        policy.highRisk,
        policy.blocked,
        policy.perCall,
        policy.autonomousGrants,
      ])
        expect(set.size).toBe(0);
      // Omitted, public means every capability (README policy table), as without a policy file.
      expect(policy.public.size).toBe(catalog.capabilities.length);
      expect(policy.constraints.size).toBe(0);
      expect(policy.hosts).toEqual([]);
      expect(policy.rateLimits.perAgent).toEqual({ count: 600, windowMs: 60_000 });
      expect(policy.rateLimits.unknownHostRegistration).toEqual({ count: 20, windowMs: 600_000 });
      expect(policy.rateLimits.failedAuthPerIp).toEqual({ count: 60, windowMs: 60_000 });
      expect(policy.rateLimits.perCapability.size).toBe(0);
      expect(policy.rateLimits.inFlight).toEqual({ perAgent: 16, perHost: 64, total: 256 });
      expect(policy.capabilityRequests).toEqual({
        maxEntries: 100,
        maxConstraintBytes: 8192,
        maxConstraintDepth: 8,
      });
      expect(policy.pendingHosts).toEqual({ maxHosts: 1000, maxAgents: 10, maxOpenApprovals: 10 });
      expect(policy.replay).toEqual({ maxEntries: 200_000, maxEntriesPerIdentity: 2000 });
      expect(policy.audit.logArguments).toBe(false);
    }
  });

  it('defaultPolicy: GET/HEAD operations are defaults, every other method is high-risk, all public', () => {
    const policy = defaultPolicy(catalog);
    expect(sorted(policy.defaults)).toEqual(['get_inventory', 'get_pet', 'list_pets']);
    expect(sorted(policy.highRisk)).toEqual(['create_pet', 'delete_pet', 'place_order']);
    expect(policy.blocked.size).toBe(0);
    expect(sorted(policy.public)).toEqual(catalog.capabilities.map((c) => c.name).sort());
    expect(policy.autonomousGrants.size).toBe(0);
    expect(policy.modes).toEqual(['delegated']);
    const empty = parse('');
    expect(policy.lifetimes).toEqual(empty.lifetimes);
    // The file's limits, and each high-risk capability on its own high_risk budget.
    expect({ ...policy.rateLimits, perCapability: empty.rateLimits.perCapability }).toEqual(empty.rateLimits);
    expect([...policy.rateLimits.perCapability.keys()].sort()).toEqual([
      'create_pet',
      'delete_pet',
      'place_order',
    ]);
    expect(policy.approval).toEqual(empty.approval);
    expect(Object.isFrozen(policy)).toBe(true);
  });

  it('is frozen', () => {
    const policy = parse('hosts: [{public_key: {kty: OKP, crv: Ed25519, x: ' + publicX() + '}}]');
    expect(Object.isFrozen(policy)).toBe(true);
    expect(Object.isFrozen(policy.modes)).toBe(true);
    expect(Object.isFrozen(policy.lifetimes)).toBe(true);
    expect(Object.isFrozen(policy.hosts[0])).toBe(true);
    expect(Object.isFrozen(policy.hosts[0]?.publicJwk)).toBe(true);
  });
});

describe('capability lists', () => {
  it('takes exact names', () => {
    expect(sorted(parse('capabilities: {defaults: [list_pets, get_pet]}').defaults)).toEqual([
      'get_pet',
      'list_pets',
    ]);
  });

  it('expands globs over names', () => {
    expect(sorted(parse("capabilities: {defaults: ['get_*']}").defaults)).toEqual([
      'get_inventory',
      'get_pet',
    ]);
    expect(sorted(parse("capabilities: {defaults: ['*']}").defaults)).toEqual(ALL);
    expect(sorted(parse("capabilities: {defaults: ['*_pet']}").defaults)).toEqual([
      'create_pet',
      'delete_pet',
      'get_pet',
    ]);
    expect(sorted(parse("capabilities: {defaults: ['get_pe?']}").defaults)).toEqual(['get_pet']);
  });

  it('matches selectors by method, tag, path and operationId (AND across keys, OR within)', () => {
    const names = (selector: string): string[] =>
      sorted(parse(`capabilities: {public: [${selector}]}`).public);
    expect(names('{methods: [GET]}')).toEqual(['get_inventory', 'get_pet', 'list_pets']);
    expect(names('{methods: [POST, DELETE]}')).toEqual(['create_pet', 'delete_pet', 'place_order']);
    expect(names('{tags: [store]}')).toEqual(['get_inventory', 'place_order']);
    expect(names("{paths: ['/pets/*']}")).toEqual(['delete_pet', 'get_pet']);
    expect(names("{paths: ['/store/**']}")).toEqual(['get_inventory', 'place_order']);
    expect(names("{operation_ids: ['*Pet']}")).toEqual(['create_pet', 'delete_pet', 'get_pet']);
    expect(names('{tags: [pets], methods: [GET]}')).toEqual(['get_pet', 'list_pets']);
  });

  it('unions the entries of a list', () => {
    const policy = parse("capabilities: {blocked: [delete_pet, {tags: [store]}, 'list_*']}");
    expect(sorted(policy.blocked)).toEqual(['delete_pet', 'get_inventory', 'list_pets', 'place_order']);
  });

  it('refuses a name, glob or selector that matches no capability, naming it and its key path', () => {
    const lines = failures(`
capabilities:
  defaults: [list_pets, get_pet, lst_pets]
  high_risk: ['admin_*']
  blocked: [{tags: [admin]}]
autonomous:
  grants: [nope]
hosts:
  - public_key: {kty: OKP, crv: Ed25519, x: ${publicX()}}
    default_capabilities: [list_pets, {methods: [PATCH]}]
`);
    expect(lines).toHaveLength(5);
    expect(lines[0]).toMatch(/^policy\.yaml: capabilities\.defaults\[2\]: "lst_pets" matches no capability/);
    expect(lines[0]).toContain('list_pets');
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^policy\.yaml: capabilities\.high_risk\[0\]: glob "admin_\*" matches no capability/,
      ),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^policy\.yaml: capabilities\.blocked\[0\]: selector \{"tags":\["admin"\]\} matches no capability/,
      ),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/^policy\.yaml: autonomous\.grants\[0\]: "nope" matches no capability/),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^policy\.yaml: hosts\[0\]\.default_capabilities\[1\]: selector .*PATCH.* matches no capability/,
      ),
    );
  });

  it('refuses malformed entries through the schema', () => {
    expect(failures('capabilities: {defaults: [List_Pets]}')).toEqual([
      expect.stringMatching(
        /^policy\.yaml: capabilities\.defaults\[0\]: must be a capability name or a glob .*\(got "List_Pets"\)$/,
      ),
    ]);
    expect(failures('capabilities: {defaults: [{verbs: [GET]}]}')).toEqual([
      expect.stringMatching(
        /^policy\.yaml: capabilities\.defaults\[0\]\.verbs: unknown key; allowed keys: methods, tags, paths, operation_ids$/,
      ),
    ]);
    expect(failures('capabilities: {defaults: [{methods: [FETCH]}]}')).toEqual([
      expect.stringMatching(
        /^policy\.yaml: capabilities\.defaults\[0\]\.methods\[0\]: must be one of "GET", .*\(got "FETCH"\)$/,
      ),
    ]);
    expect(failures('capabilities: {defaults: [{}]}')).toEqual([
      'policy.yaml: capabilities.defaults[0]: must set at least one key',
    ]);
    expect(failures('capabilities: {defaults: [5]}')).toEqual([
      'policy.yaml: capabilities.defaults[0]: must be an object (got 5)',
    ]);
    expect(failures('capabilities: {defaults: list_pets}')).toEqual([
      'policy.yaml: capabilities.defaults: must be an array (got "list_pets")',
    ]);
  });
});

describe('precedence', () => {
  it('removes high-risk and blocked capabilities from defaults, autonomous grants and host defaults', () => {
    const policy = parse(`
modes: [delegated, autonomous]
capabilities:
  defaults: ['*']
  high_risk: [{methods: [POST]}]
  blocked: [delete_pet]
  public: ['*']
autonomous:
  grants: [place_order, list_pets, delete_pet]
hosts:
  - public_key: {kty: OKP, crv: Ed25519, x: ${publicX()}}
    default_capabilities: [create_pet, get_pet, delete_pet]
`);
    expect(sorted(policy.highRisk)).toEqual(['create_pet', 'place_order']);
    expect(sorted(policy.blocked)).toEqual(['delete_pet']);
    expect(sorted(policy.defaults)).toEqual(['get_inventory', 'get_pet', 'list_pets']);
    expect(sorted(policy.autonomousGrants)).toEqual(['list_pets']);
    expect(policy.hosts[0]?.defaultCapabilities).toEqual(['get_pet']);
    // High-risk capabilities may still be listed publicly; blocked ones never are.
    expect(sorted(policy.public)).toEqual([
      'create_pet',
      'get_inventory',
      'get_pet',
      'list_pets',
      'place_order',
    ]);
  });
});

describe('durations', () => {
  it('takes units and bare seconds; null disables the agent lifetime clocks', () => {
    const policy = parse(`
approval: {expires_in: 900, interval: 2s}
lifetimes: {session_ttl: null, max_lifetime: 12h, absolute_lifetime: null, max_jwt_lifetime: 30, clock_skew: 0, pending_cleanup: 7d}
`);
    expect(policy.approval.expiresInMs).toBe(900_000);
    expect(policy.approval.intervalMs).toBe(2_000);
    expect(policy.lifetimes).toEqual({
      sessionTtlMs: null,
      maxLifetimeMs: 12 * 3_600_000,
      absoluteLifetimeMs: null,
      maxJwtLifetimeSec: 30,
      clockSkewSec: 0,
      pendingCleanupMs: 7 * 86_400_000,
    });
  });

  it('refuses malformed durations, naming the key', () => {
    const lines = failures(`
approval: {expires_in: 10 min, interval: true}
lifetimes: {session_ttl: -5, max_jwt_lifetime: null, pending_cleanup: 1.5h}
`);
    expect(lines).toEqual([
      'policy.yaml: approval.expires_in: must be a duration: a whole number with a unit s, m, h or d ("30s", "10m", "24h", "30d"), or a whole number of seconds (got "10 min")',
      expect.stringMatching(/^policy\.yaml: approval\.interval: must be a duration: .*\(got true\)$/),
      expect.stringMatching(
        /^policy\.yaml: lifetimes\.session_ttl: must be a duration: .*, or null to disable \(got -5\)$/,
      ),
      expect.stringMatching(
        /^policy\.yaml: lifetimes\.max_jwt_lifetime: must be a duration: .*\(got null\)$/,
      ),
      expect.stringMatching(
        /^policy\.yaml: lifetimes\.pending_cleanup: must be a duration: .*\(got "1\.5h"\)$/,
      ),
    ]);
  });

  it('refuses durations too large to be exact', () => {
    // pending_cleanup is also compared with approval.expires_in: a bad value is reported once.
    expect(
      failures('lifetimes: {absolute_lifetime: 99999999999999d, pending_cleanup: 99999999999999d}'),
    ).toEqual([
      expect.stringMatching(
        /^policy\.yaml: lifetimes\.absolute_lifetime: invalid duration "99999999999999d"/,
      ),
      expect.stringMatching(/^policy\.yaml: lifetimes\.pending_cleanup: invalid duration "99999999999999d"/),
    ]);
  });

  it('refuses zero where a zero would lock everyone out', () => {
    const lines = failures('approval: {interval: 0s}\nlifetimes: {session_ttl: 0, max_jwt_lifetime: 0s}');
    expect(lines).toEqual([
      'policy.yaml: approval.interval: must be at least 1s (got "0s")',
      'policy.yaml: lifetimes.session_ttl: must be at least 1s (got 0)',
      'policy.yaml: lifetimes.max_jwt_lifetime: must be at least 1s (got "0s")',
    ]);
  });

  it('refuses a clock skew over 30 seconds (§8.2)', () => {
    expect(parse('lifetimes: {clock_skew: 30s}').lifetimes.clockSkewSec).toBe(30);
    for (const skew of ['31s', '1m', '31']) {
      expect(failures(`lifetimes: {clock_skew: ${skew}}`)).toEqual([
        expect.stringMatching(/^policy\.yaml: lifetimes\.clock_skew: must be at most 30s: .*§8\.2/),
      ]);
    }
  });

  it('refuses an interval longer than the approval lifetime, and a cleanup shorter than it', () => {
    expect(failures('approval: {expires_in: 1m, interval: 2m}')).toEqual([
      'policy.yaml: approval.interval: must not exceed approval.expires_in ("1m")',
    ]);
    expect(failures('approval: {expires_in: 2h}\nlifetimes: {pending_cleanup: 1h}')).toEqual([
      expect.stringMatching(
        /^policy\.yaml: lifetimes\.pending_cleanup: must be at least approval\.expires_in \("2h"\)/,
      ),
    ]);
  });
});

describe('modes and approval', () => {
  it('takes both modes', () => {
    expect(parse('modes: [autonomous, delegated]').modes).toEqual(['autonomous', 'delegated']);
  });

  it('refuses empty, duplicate or unknown modes', () => {
    expect(failures('modes: []')).toEqual(['policy.yaml: modes: must not be empty']);
    expect(failures('modes: [delegated, delegated]')).toEqual([
      expect.stringMatching(/^policy\.yaml: modes: must NOT have duplicate items/),
    ]);
    expect(failures('modes: [robot]')).toEqual([
      'policy.yaml: modes[0]: must be one of "delegated", "autonomous" (got "robot")',
    ]);
  });

  it('requires device authorization among the approval methods (§7.1)', () => {
    expect(failures('approval: {methods: [ciba], approvers: [alice]}')).toEqual([
      'policy.yaml: approval.methods: must include "device_authorization": every server supports device authorization (§7.1) (got ["ciba"])',
    ]);
    expect(failures('approval: {methods: [push]}')).toContainEqual(
      'policy.yaml: approval.methods[0]: must be one of "device_authorization", "ciba" (got "push")',
    );
  });

  it('requires approvers when CIBA is enabled', () => {
    expect(failures('approval: {methods: [device_authorization, ciba]}')).toEqual([
      expect.stringMatching(
        /^policy\.yaml: approval\.approvers: must list at least one user when approval\.methods includes "ciba"/,
      ),
    ]);
    expect(
      parse('approval: {methods: [device_authorization, ciba], approvers: [alice]}').approval.approvers,
    ).toEqual(['alice']);
  });
});

describe('approval.warn_names (§8.10)', () => {
  it('takes up to 50 distinct names of 2 to 64 characters', () => {
    expect(parse('approval: {warn_names: [Acme Bank, AcmePay]}').approval.warnNames).toEqual([
      'Acme Bank',
      'AcmePay',
    ]);
    expect(failures('approval: {warn_names: [A]}')).toEqual([
      'policy.yaml: approval.warn_names[0]: must be at least 2 characters (got "A")',
    ]);
    expect(failures('approval: {warn_names: [Acme, Acme]}')).toEqual([
      expect.stringMatching(/^policy\.yaml: approval\.warn_names: must NOT have duplicate items/),
    ]);
    const many = Array.from({ length: 51 }, (_, i) => `name${i}`).join(', ');
    expect(failures(`approval: {warn_names: [${many}]}`)).toEqual([
      expect.stringMatching(/^policy\.yaml: approval\.warn_names: must NOT have more than 50 items/),
    ]);
  });
});

describe('approval.verification_uri (§7.1)', () => {
  it('takes an absolute http(s) URL, query included', () => {
    expect(
      parse('approval: {verification_uri: "https://portal.example.com/agents?tab=1"}').approval
        .verificationUri,
    ).toBe('https://portal.example.com/agents?tab=1');
  });

  it.each([
    '/device',
    'portal.example.com',
    'javascript:alert(1)',
    'ftp://x.example/',
    'https://x.example/#frag',
  ])('refuses %j', (uri) => {
    expect(failures(`approval: {verification_uri: ${JSON.stringify(uri)}}`)).toEqual([
      expect.stringMatching(/^policy\.yaml: approval\.verification_uri: must be an absolute http\(s\) URL/),
    ]);
  });
});

describe('constraints', () => {
  it('validates and normalizes constraints against the capability input fields', () => {
    const policy = parse(`
capabilities:
  constraints:
    place_order: {quantity: {max: 10}, petId: 7}
    list_pets: {status: {in: [available, pending]}}
`);
    expect(policy.constraints.get('place_order')).toEqual({ quantity: { max: 10 }, petId: 7 });
    expect(policy.constraints.get('list_pets')).toEqual({ status: { in: ['available', 'pending'] } });
  });

  it('refuses unknown operators, naming them and the key path', () => {
    const lines = failures('capabilities: {constraints: {place_order: {quantity: {maximum: 10, lte: 3}}}}');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^policy\.yaml: capabilities\.constraints\.place_order: .*"maximum", "lte"/);
  });

  it('refuses nested paths and fields the capability does not take', () => {
    expect(failures("capabilities: {constraints: {place_order: {'pet.id': 7}}}")).toEqual([
      expect.stringMatching(
        /^policy\.yaml: capabilities\.constraints\.place_order: .*"pet\.id" is a nested path/,
      ),
    ]);
    expect(failures('capabilities: {constraints: {place_order: {color: red}}}')).toEqual([
      expect.stringMatching(
        /^policy\.yaml: capabilities\.constraints\.place_order: .*"color" is not an input field/,
      ),
    ]);
    // get_inventory takes no input at all.
    expect(failures('capabilities: {constraints: {get_inventory: {petId: 1}}}')).toEqual([
      expect.stringMatching(
        /^policy\.yaml: capabilities\.constraints\.get_inventory: .*"petId" is not an input field/,
      ),
    ]);
  });

  it('refuses malformed operator values', () => {
    expect(failures("capabilities: {constraints: {place_order: {quantity: {max: 'ten'}}}}")).toEqual([
      expect.stringMatching(/^policy\.yaml: capabilities\.constraints\.place_order: /),
    ]);
  });

  it('takes exact capability names only', () => {
    expect(failures("capabilities: {constraints: {'place_*': {quantity: {max: 1}}, nope: {a: 1}}}")).toEqual([
      expect.stringMatching(
        /^policy\.yaml: capabilities\.constraints\.place_\*: "place_\*" is not a capability name/,
      ),
      expect.stringMatching(
        /^policy\.yaml: capabilities\.constraints\.nope: "nope" is not a capability name/,
      ),
    ]);
  });

  it('refuses an empty or non-object constraint set', () => {
    expect(failures('capabilities: {constraints: {place_order: {}}}')).toEqual([
      'policy.yaml: capabilities.constraints.place_order: must set at least one key',
    ]);
    expect(failures('capabilities: {constraints: {place_order: 5}}')).toEqual([
      'policy.yaml: capabilities.constraints.place_order: must be an object (got 5)',
    ]);
  });
});

describe('hosts', () => {
  it('resolves pre-registered hosts, keeping only the public members of the key', () => {
    const x = publicX();
    const policy = parse(`
hosts:
  - name: ci-runner
    public_key: {kty: OKP, crv: Ed25519, x: ${x}, kid: k1, alg: EdDSA, use: sig}
    user_id: alice
    default_capabilities: ['get_*']
  - public_key: {kty: OKP, crv: Ed25519, x: ${publicX()}}
`);
    expect(policy.hosts[0]).toEqual({
      name: 'ci-runner',
      publicJwk: { kty: 'OKP', crv: 'Ed25519', x },
      userId: 'alice',
      defaultCapabilities: ['get_inventory', 'get_pet'],
    });
    expect(policy.hosts[1]).toEqual({ publicJwk: expect.any(Object), defaultCapabilities: [] });
    expect('name' in (policy.hosts[1] as object)).toBe(false);
    expect('userId' in (policy.hosts[1] as object)).toBe(false);
  });

  it('refuses a private key, without quoting it (the message reaches CI logs)', () => {
    const { privateKey } = newKeyPair('ed25519');
    const jwk = privateKey.export({ format: 'jwk' });
    const shown = failures(`hosts: [{public_key: {kty: OKP, crv: Ed25519, x: ${jwk.x}, d: ${jwk.d}}}]`);
    expect(shown).toEqual([
      expect.stringMatching(/^policy\.yaml: hosts\[0\]\.public_key\.d: is private key material: .*§8\.1\)$/),
    ]);
    expect(shown.join('\n')).not.toContain(jwk.d as string);
  });

  it('refuses other key types and curves', () => {
    expect(failures(`hosts: [{public_key: {kty: OKP, crv: X25519, x: ${publicX()}}}]`)).toEqual([
      'policy.yaml: hosts[0].public_key.crv: must be one of "Ed25519" (got "X25519")',
    ]);
    expect(failures('hosts: [{public_key: {kty: EC, crv: P-256, x: abc, y: def}}]')).toEqual([
      'policy.yaml: hosts[0].public_key.y: unknown key; allowed keys: kty, crv, x, kid, alg, use, d',
      'policy.yaml: hosts[0].public_key.kty: must be one of "OKP" (got "EC")',
      'policy.yaml: hosts[0].public_key.crv: must be one of "Ed25519" (got "P-256")',
      'policy.yaml: hosts[0].public_key.x: must be the 32-byte Ed25519 public key in base64url without padding (43 characters) (got "abc")',
    ]);
  });

  it('refuses an x that is not exactly 32 bytes of canonical base64url', () => {
    expect(failures('hosts: [{public_key: {kty: OKP, crv: Ed25519, x: AAAA}}]')).toEqual([
      expect.stringMatching(
        /^policy\.yaml: hosts\[0\]\.public_key\.x: must be the 32-byte Ed25519 public key/,
      ),
    ]);
    // 43 characters hold 258 bits: the last character's two low bits must be zero. Setting one
    // decodes to the same 32 bytes, a second spelling of the key, which is refused.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const x = publicX();
    const tampered = `${x.slice(0, -1)}${alphabet[alphabet.indexOf(x.at(-1) as string) + 1] as string}`;
    const lines = errorLines(() => parse(`hosts: [{public_key: {kty: OKP, crv: Ed25519, x: ${tampered}}}]`));
    expect(lines[0]).toMatch(/^policy\.yaml: hosts\[0\]\.public_key: .*exactly 32 bytes/);
  });

  it.each([...SMALL_ORDER_KEYS, ...NON_CANONICAL_KEYS])(
    'refuses a pre-registered host whose key is weak: %s',
    (_name, x) => {
      expect(failures(`hosts: [{public_key: {kty: OKP, crv: Ed25519, x: "${x}"}}]`)).toEqual([
        expect.stringMatching(
          /^policy\.yaml: hosts\[0\]\.public_key: The JWK "x" is a (small-order|non-canonical)/,
        ),
      ]);
    },
  );

  it('refuses a missing key and a key used twice', () => {
    expect(failures('hosts: [{name: a}]')).toEqual(['policy.yaml: hosts[0].public_key: is required']);
    const x = publicX();
    expect(
      failures(
        `hosts: [{public_key: {kty: OKP, crv: Ed25519, x: ${x}}}, {public_key: {kty: OKP, crv: Ed25519, x: ${x}}}]`,
      ),
    ).toEqual([
      expect.stringMatching(/^policy\.yaml: hosts\[1\]\.public_key: is the same key as hosts\[0\]/),
    ]);
  });
});

describe('bounds: capability_requests, pending_hosts, replay', () => {
  it('reads every bound', () => {
    const policy = parse(`
capability_requests: {max_entries: 5, max_constraint_bytes: 100, max_constraint_depth: 2}
pending_hosts: {max_hosts: 3, max_agents: 2, max_open_approvals: 1}
replay: {max_entries: 50, max_entries_per_identity: 5}
`);
    expect(policy.capabilityRequests).toEqual({
      maxEntries: 5,
      maxConstraintBytes: 100,
      maxConstraintDepth: 2,
    });
    expect(policy.pendingHosts).toEqual({ maxHosts: 3, maxAgents: 2, maxOpenApprovals: 1 });
    expect(policy.replay).toEqual({ maxEntries: 50, maxEntriesPerIdentity: 5 });
  });

  it('refuses a per-identity replay cap above the total', () => {
    expect(failures('replay: {max_entries: 100, max_entries_per_identity: 101}')).toEqual([
      'policy.yaml: replay.max_entries_per_identity: must not exceed replay.max_entries (100)',
    ]);
  });

  it('refuses bounds that would disable themselves (zero, negative, fractional, unknown keys)', () => {
    expect(failures('pending_hosts: {max_agents: 0}')).toEqual([
      expect.stringMatching(/^policy\.yaml: pending_hosts\.max_agents: must be >= 1/),
    ]);
    expect(failures('capability_requests: {max_constraint_depth: 1.5}')).toEqual([
      expect.stringMatching(/^policy\.yaml: capability_requests\.max_constraint_depth: must be an integer/),
    ]);
    expect(failures('replay: {max_entries: -1}')).toEqual([
      expect.stringMatching(/^policy\.yaml: replay\.max_entries: must be >= 10/),
    ]);
    expect(failures('replay: {size: 5}')).toEqual([expect.stringMatching(/replay\.size: unknown key/)]);
  });
});

describe('rate limits', () => {
  it('parses COUNT/DURATION and null', () => {
    const policy = parse(`
rate_limits:
  per_agent: 60/1m
  per_host: 10/30s
  per_user: null
  per_ip: 1000/1d
  unknown_host_registration: 5/1h
  failed_auth_per_ip: null
  per_capability: {place_order: 10/1h, delete_pet: null}
`);
    expect(policy.rateLimits).toEqual({
      perAgent: { count: 60, windowMs: 60_000 },
      perHost: { count: 10, windowMs: 30_000 },
      perUser: null,
      perIp: { count: 1000, windowMs: 86_400_000 },
      unknownHostRegistration: { count: 5, windowMs: 3_600_000 },
      approvalRequestsPerUser: { count: 5, windowMs: 60_000 },
      failedAuthPerIp: null,
      perCapability: new Map([
        [
          'place_order',
          { global: { count: 10, windowMs: 3_600_000 }, perAgent: null, perHost: null, perUser: null },
        ],
      ]),
      highRisk: { global: null, perAgent: { count: 60, windowMs: 60_000 }, perHost: null, perUser: null },
      inFlight: { perAgent: 16, perHost: 64, total: 256 },
    });
  });

  it('§8.13 high_risk: each high-risk capability without its own entry gets these limits, on its own budget', () => {
    const policy = parse(`
capabilities:
  high_risk: [create_pet, delete_pet, place_order]
rate_limits:
  high_risk: {per_agent: 3/1m, global: 100/1h}
  per_capability: {place_order: 10/1h}
`);
    const shared = {
      global: { count: 100, windowMs: 3_600_000 },
      perAgent: { count: 3, windowMs: 60_000 },
      perHost: null,
      perUser: null,
    };
    expect(Object.fromEntries(policy.rateLimits.perCapability)).toEqual({
      create_pet: shared,
      delete_pet: shared,
      // Its own entry wins over the high-risk one.
      place_order: {
        global: { count: 10, windowMs: 3_600_000 },
        perAgent: null,
        perHost: null,
        perUser: null,
      },
    });
    // Without a policy file every method but GET and HEAD is high-risk, with the default limits.
    expect(Object.fromEntries(defaultPolicy(catalog).rateLimits.perCapability)).toEqual({
      create_pet: HIGH_RISK_DEFAULT,
      delete_pet: HIGH_RISK_DEFAULT,
      place_order: HIGH_RISK_DEFAULT,
    });
    // A per_capability entry of null is that capability's own choice: no limit, not high_risk's.
    const exempt = parse(
      'capabilities:\n  high_risk: [create_pet, delete_pet]\nrate_limits:\n  per_capability: {delete_pet: null}\n',
    );
    expect([...exempt.rateLimits.perCapability.keys()]).toEqual(['create_pet']);
    // null: no limits of the kind.
    const none = parse('capabilities:\n  high_risk: [create_pet]\nrate_limits:\n  high_risk: null\n');
    expect(none.rateLimits.perCapability.size).toBe(0);
    expect(none.rateLimits.highRisk).toBeNull();
  });

  it('per_capability: a plain string keeps meaning one bucket over all agents; an object sets limits per agent, host and user', () => {
    const policy = parse(`
rate_limits:
  per_capability:
    place_order: {per_agent: 2/1m, per_user: 5/1m, global: 10/1m}
    create_pet: {per_host: 3/1h}
    get_pet: 7/1m
    delete_pet: {per_agent: null}
`);
    expect(Object.fromEntries(policy.rateLimits.perCapability)).toEqual({
      place_order: {
        global: { count: 10, windowMs: 60_000 },
        perAgent: { count: 2, windowMs: 60_000 },
        perHost: null,
        perUser: { count: 5, windowMs: 60_000 },
      },
      create_pet: { global: null, perAgent: null, perHost: { count: 3, windowMs: 3_600_000 }, perUser: null },
      get_pet: { global: { count: 7, windowMs: 60_000 }, perAgent: null, perHost: null, perUser: null },
    });
  });

  it('per_capability objects: a malformed limit or an unknown dimension is refused with its key path', () => {
    expect(
      failures(`
rate_limits:
  per_capability:
    place_order: {per_agent: 2 per minute, per_user: 0/1m}
    create_pet: {per_tenant: 1/1m}
    get_pet: {}
`),
    ).toEqual([
      expect.stringMatching(
        /^policy\.yaml: rate_limits\.per_capability\.place_order\.per_agent: must be a rate limit .*\(got "2 per minute"\)$/,
      ),
      expect.stringMatching(
        /^policy\.yaml: rate_limits\.per_capability\.place_order\.per_user: must be a rate limit .*\(got "0\/1m"\)$/,
      ),
      'policy.yaml: rate_limits.per_capability.create_pet.per_tenant: unknown key; allowed keys: global, per_agent, per_host, per_user',
      'policy.yaml: rate_limits.per_capability.get_pet: must set at least one key',
    ]);
  });

  it('in-flight caps: whole numbers or null; a narrower cap above a wider one is refused (it would never bind)', () => {
    expect(
      parse('rate_limits: {in_flight_per_agent: 2, in_flight_per_host: null, in_flight_total: 5}').rateLimits
        .inFlight,
    ).toEqual({ perAgent: 2, perHost: null, total: 5 });
    expect(
      failures('rate_limits: {in_flight_per_agent: 0, in_flight_per_host: "many", in_flight_total: 2.5}'),
    ).toEqual([
      'policy.yaml: rate_limits.in_flight_per_agent: must be a whole number of upstream calls at once, from 1 to 1000000, or null to disable (got 0)',
      'policy.yaml: rate_limits.in_flight_per_host: must be a whole number of upstream calls at once, from 1 to 1000000, or null to disable (got "many")',
      'policy.yaml: rate_limits.in_flight_total: must be a whole number of upstream calls at once, from 1 to 1000000, or null to disable (got 2.5)',
    ]);
    expect(failures('rate_limits: {in_flight_per_agent: 65}')).toEqual([
      'policy.yaml: rate_limits.in_flight_per_agent: must not exceed rate_limits.in_flight_per_host (64), which would be reached first (got 65)',
    ]);
    expect(failures('rate_limits: {in_flight_per_host: 300, in_flight_total: 200}')).toEqual([
      'policy.yaml: rate_limits.in_flight_per_host: must not exceed rate_limits.in_flight_total (200), which would be reached first (got 300)',
    ]);
  });

  it('refuses malformed limits, naming the key', () => {
    const lines = failures(`
rate_limits:
  per_agent: 60 per minute
  per_host: 0/1m
  per_user: 60
  per_capability: {place_order: 10/h}
`);
    expect(lines).toEqual([
      'policy.yaml: rate_limits.per_agent: must be a rate limit "COUNT/DURATION" with COUNT >= 1, e.g. "60/1m" or "5/1h", or null to disable (got "60 per minute")',
      expect.stringMatching(/^policy\.yaml: rate_limits\.per_host: must be a rate limit .*\(got "0\/1m"\)$/),
      expect.stringMatching(/^policy\.yaml: rate_limits\.per_user: must be a rate limit .*\(got 60\)$/),
      expect.stringMatching(
        /^policy\.yaml: rate_limits\.per_capability\.place_order: must be a rate limit .*\(got "10\/h"\)$/,
      ),
    ]);
  });

  it('refuses an empty window and an unknown capability', () => {
    expect(failures('rate_limits: {per_agent: 10/0s, per_capability: {nope: 1/1m}}')).toEqual([
      'policy.yaml: rate_limits.per_agent: the window must be at least 1s (got "10/0s")',
      'policy.yaml: rate_limits.per_capability.nope: "nope" is not a capability name (per_capability takes exact names, not globs)',
    ]);
  });
});

describe('file and YAML errors', () => {
  it('names the file on a YAML syntax error', () => {
    const lines = failures('modes: [delegated\napproval: {');
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(line).toMatch(/^policy\.yaml: /);
  });

  it('names the file and the key on a duplicate key', () => {
    const lines = failures('modes: [delegated]\nmodes: [autonomous]\n');
    expect(lines).toEqual([expect.stringMatching(/^policy\.yaml: Map keys must be unique.*line 2/)]);
  });

  it('refuses unknown keys, listing the allowed ones', () => {
    const lines = failures('lifetimes: {session: 5m}\nextra: 1');
    expect(lines).toHaveLength(2);
    expect(lines).toEqual(
      expect.arrayContaining([
        'policy.yaml: lifetimes.session: unknown key; allowed keys: session_ttl, max_lifetime, absolute_lifetime, max_jwt_lifetime, clock_skew, pending_cleanup',
        expect.stringMatching(/^policy\.yaml: extra: unknown key; allowed keys: modes, approval, /),
      ]),
    );
  });

  it('refuses a document that is not a mapping', () => {
    expect(failures('- delegated')).toEqual([
      'policy.yaml: (top level): must be an object (got ["delegated"])',
    ]);
  });

  it('reads files and names an unreadable one', () => {
    const file = join(dir, 'ok.yaml');
    writeFileSync(file, 'modes: [autonomous]\n');
    expect(loadPolicyFile(file, catalog).modes).toEqual(['autonomous']);
    const missing = join(dir, 'missing.yaml');
    expect(errorLines(() => loadPolicyFile(missing, catalog))).toEqual([
      `${missing}: policy file not found or not readable`,
    ]);
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'lifetimes: {clock_skew: 1h}\n');
    expect(errorLines(() => loadPolicyFile(bad, catalog))[0]).toMatch(
      new RegExp(`^${bad.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: lifetimes\\.clock_skew: `),
    );
  });

  it('reports every problem at once', () => {
    const lines = failures(`
lifetimes: {clock_skew: 45s}
capabilities: {defaults: [nope], constraints: {place_order: {quantity: {gt: 1}}}}
rate_limits: {per_capability: {nope: 1/1m}}
`);
    expect(lines).toHaveLength(4);
  });
});
