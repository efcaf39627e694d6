/**
 * The policy file as the schema leaves it. What the resolvers here produce from it is the resolved
 * policy the protocol layer reads (src/protocol/resolved-policy.ts).
 */
import type { FromSchema } from 'json-schema-to-ts';
import type { POLICY_SCHEMA } from './schema.js';

// ---------------------------------------------------------------------------------------------
// The file as ajv leaves it (defaults filled in), derived from the JSON Schema: the schema is the
// one source of both the rules and these types.

export type PolicyFile = FromSchema<typeof POLICY_SCHEMA, { parseIfThenElseKeywords: true }>;
export type Duration = PolicyFile['approval']['expires_in'];
export type CapabilityListItem = PolicyFile['capabilities']['defaults'][number];
/** `per_capability` entry: a plain limit (over all agents), or limits by dimension. */
export type CapabilityRateLimitsFile = PolicyFile['rate_limits']['per_capability'][string];
