/**
 * The approver's choices checked against the request as shown (src/protocol/decision.ts): partial
 * approval, narrowing that only tightens (§2.13: MAY narrow, MUST NOT widen), and a grant
 * lifetime from the offered list. Every widening below is an edit of the form an attacker (or an
 * agent driving the browser) could make; each is refused whole, not trimmed.
 */
import { describe, expect, it } from 'vitest';
import { checkDecision, type DecisionChoices, type FieldChoice } from '../../../src/protocol/decision.js';
import { contentHash, type DeviceRequest } from '../../../src/protocol/device.js';

const REQUEST: DeviceRequest = {
  approvalId: 'apr_test',
  userCode: 'ABCD-EFGH',
  method: 'device_authorization',
  kind: 'registration',
  agentName: 'Shelter helper',
  hostName: null,
  hostKey: null,
  mode: 'delegated',
  capabilities: [
    {
      name: 'list_pets',
      description: 'List pets',
      method: 'GET',
      constraints: { limit: { min: 1, max: 10 }, status: { in: ['available', 'pending', 'sold'] } },
      highRisk: false,
    },
    { name: 'get_pet', description: 'Get a pet', method: 'GET', constraints: { petId: 7 }, highRisk: false },
    { name: 'get_inventory', description: null, method: 'GET', constraints: null, highRisk: false },
  ],
  reason: null,
  bindingMessage: null,
  expiresAt: 0,
  linkedUser: null,
  linkUnlocks: [],
  claims: { agents: [], more: 0, moreAtLeast: false },
};

function choices(
  capabilities: string[],
  narrowing: Record<string, Record<string, FieldChoice>> = {},
  grantLifetime: string | null = null,
): DecisionChoices {
  return {
    capabilities,
    narrowing: new Map(Object.entries(narrowing).map(([c, f]) => [c, new Map(Object.entries(f))])),
    grantLifetime,
  };
}

const ALL = ['list_pets', 'get_pet', 'get_inventory'];

describe('checkDecision', () => {
  it('approves a subset: the others are left out (partial approval)', () => {
    const out = checkDecision(REQUEST, choices(['list_pets', 'get_inventory']));
    expect(out).toEqual({
      ok: true,
      decision: { capabilities: ['list_pets', 'get_inventory'], constraints: {} },
    });
  });

  it('narrows a range and a value list; the request’s other limits stay', () => {
    const out = checkDecision(
      REQUEST,
      choices(ALL, { list_pets: { limit: { min: 2, max: 5 }, status: { in: ['available'] } } }, '7d'),
    );
    expect(out).toEqual({
      ok: true,
      decision: {
        capabilities: ALL,
        constraints: { list_pets: { limit: { min: 2, max: 5 }, status: { in: ['available'] } } },
        grantLifetimeMs: 7 * 86_400_000,
      },
    });
  });

  it('a choice equal to the request is no change; an unchecked capability’s narrowing is ignored', () => {
    expect(checkDecision(REQUEST, choices(ALL, { list_pets: { limit: { min: 1, max: 10 } } }))).toEqual({
      ok: true,
      decision: {
        capabilities: ALL,
        constraints: {
          list_pets: { limit: { min: 1, max: 10 }, status: { in: ['available', 'pending', 'sold'] } },
        },
      },
    });
    expect(checkDecision(REQUEST, choices(['get_pet'], { list_pets: { limit: { max: 3 } } }))).toEqual({
      ok: true,
      decision: { capabilities: ['get_pet'], constraints: {} },
    });
  });

  it('adding a minimum where the request only had a maximum is narrowing, and allowed', () => {
    const request = {
      ...REQUEST,
      capabilities: [{ ...REQUEST.capabilities[0]!, constraints: { limit: { max: 10 } } }],
    };
    expect(
      checkDecision(request, choices(['list_pets'], { list_pets: { limit: { min: 4 } } })),
    ).toMatchObject({
      ok: true,
      decision: { constraints: { list_pets: { limit: { min: 4, max: 10 } } } },
    });
  });

  const refused = (why: string, c: DecisionChoices, says: string): void => {
    it(`refuses ${why}`, () => {
      const out = checkDecision(REQUEST, c);
      expect(out.ok).toBe(false);
      if (!out.ok) expect(out.problem).toContain(says);
    });
  };

  refused('nothing chosen (approve at least one, or deny)', choices([]), 'No capability was chosen');
  refused(
    'a capability the request does not have (widening by name)',
    choices(['list_pets', 'delete_pet']),
    'delete_pet is not part of this request',
  );
  refused(
    'a larger maximum than asked (widening a range)',
    choices(ALL, { list_pets: { limit: { max: 1000 } } }),
    'The largest value the agent asked for on list_pets, limit is 10; 1000 would widen it.',
  );
  refused(
    'a smaller minimum than asked (widening a range downwards)',
    choices(ALL, { list_pets: { limit: { min: -5 } } }),
    'The smallest value the agent asked for on list_pets, limit is 1; -5 would widen it.',
  );
  refused(
    'a value the agent did not list (widening a value list)',
    choices(ALL, { list_pets: { status: { in: ['available', 'adopted'] } } }),
    '"adopted" is not one of the values the agent asked for',
  );
  refused(
    'a value list on a field the request only bounds by range',
    choices(ALL, { list_pets: { limit: { in: [3] } } }),
    'The request lists no allowed values for list_pets, limit.',
  );
  refused(
    'a limit on a field the request left open',
    choices(ALL, { list_pets: { name: { max: 3 } } }),
    'The request sets no limit on list_pets, name',
  );
  refused(
    'a change to a field the request fixes to one value',
    choices(ALL, { get_pet: { petId: { max: 9 } } }),
    'get_pet, petId is fixed to one value',
  );
  refused(
    'an unconstrained capability narrowed (it has no limits to narrow)',
    choices(ALL, { get_inventory: { x: { max: 1 } } }),
    'The request sets no limit on get_inventory, x',
  );
  refused(
    'a range that allows nothing',
    choices(ALL, { list_pets: { limit: { min: 8, max: 3 } } }),
    'allow no value',
  );
  refused(
    'every allowed value unchecked',
    choices(ALL, { list_pets: { status: { in: [] } } }),
    'No value is allowed for list_pets, status',
  );
  refused(
    'an expiry the page does not offer',
    choices(ALL, {}, '100y'),
    'That expiry is not one this page offers.',
  );
  refused(
    'a number that is not one',
    choices(ALL, { list_pets: { limit: { max: Number.NaN } } }),
    'must be a number',
  );
});

describe('contentHash (issue 16 §2: what is approved is what was shown)', () => {
  it('changes with the capabilities, any constraint, the expiry and where the host registered from', () => {
    const base = contentHash(REQUEST);
    const [first, ...rest] = REQUEST.capabilities;
    if (!first) throw new Error('fixture');
    const variants: DeviceRequest[] = [
      { ...REQUEST, capabilities: rest },
      { ...REQUEST, capabilities: [{ ...first, constraints: { limit: { min: 1, max: 11 } } }, ...rest] },
      { ...REQUEST, expiresAt: 1 },
      {
        ...REQUEST,
        hostKey: { thumbprint: 't', registeredAt: 0, ip: '192.0.2.1', userAgent: 'UA' },
      },
    ];
    for (const v of variants) expect(contentHash(v)).not.toBe(base);
    expect(contentHash({ ...REQUEST })).toBe(base);
  });
});
