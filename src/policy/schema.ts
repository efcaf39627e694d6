/**
 * JSON Schema of the operator's policy YAML (`--policy`). Defaults live here; ajv fills them in.
 * `config/policy.schema.json` is generated from this object and a test keeps the two in sync, so
 * editors can validate policy files too. What a schema cannot say (names that must exist in the
 * catalog, constraint operators, key material, limits between keys) is checked by
 * the resolvers in `src/policy/` (see policy.ts) when the policy is resolved against the catalog.
 */

import { SECRET_MARK } from '../config/validate.js';

const HTTP_METHOD_NAMES = ['GET', 'PUT', 'POST', 'DELETE', 'OPTIONS', 'HEAD', 'PATCH', 'TRACE'] as const;

const DURATION_TEXT =
  'A duration: a whole number with a unit s, m, h or d ("30s", "10m", "24h", "30d"), or a whole number of seconds.';

export const POLICY_SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  $id: 'https://agent-auth-proxy.dev/schemas/policy.schema.json',
  title: 'agent-auth-proxy policy',
  description:
    'Who may do what without asking: agent modes, approval, lifetimes, which capabilities are granted by default, high-risk, blocked or public, server-imposed constraints, pre-registered hosts, rate limits and audit. See config/policy.example.yaml.',
  type: 'object',
  additionalProperties: false,
  $defs: {
    duration: {
      description: DURATION_TEXT,
      anyOf: [
        { type: 'string', pattern: '^[0-9]+[smhd]$' },
        { type: 'integer', minimum: 0 },
      ],
    },
    optionalDuration: {
      description: `${DURATION_TEXT} null disables the limit.`,
      anyOf: [
        { type: 'string', pattern: '^[0-9]+[smhd]$' },
        { type: 'integer', minimum: 0 },
        { type: 'null' },
      ],
    },
    rateLimit: {
      description:
        'COUNT/DURATION: at most COUNT requests per window of DURATION, e.g. "60/1m", "5/1h"; null disables the limit.',
      anyOf: [{ type: 'string', pattern: '^[1-9][0-9]*/[0-9]+[smhd]$' }, { type: 'null' }],
    },
    capabilityRateLimits: {
      description:
        'Executions of one capability: a rate limit over all agents ("10/1m"), or an object of limits by dimension. A plain string is the same as {global: STRING}.',
      if: { type: 'object' },
      then: {
        type: 'object',
        additionalProperties: false,
        minProperties: 1,
        properties: {
          global: { $ref: '#/$defs/rateLimit', description: 'Over all agents together.' },
          per_agent: { $ref: '#/$defs/rateLimit', description: 'For each agent.' },
          per_host: { $ref: '#/$defs/rateLimit', description: 'For all agents under one host together.' },
          per_user: { $ref: '#/$defs/rateLimit', description: 'For all agents linked to one user together.' },
        },
      },
      else: { $ref: '#/$defs/rateLimit' },
    },
    inFlightCap: {
      description:
        'At most this many upstream calls (open SSE streams included) running at once; null disables the cap.',
      anyOf: [{ type: 'integer', minimum: 1, maximum: 1000000 }, { type: 'null' }],
    },
    selector: {
      type: 'object',
      description:
        'Matches capabilities by their operation: every key set must match (AND); any value in a list may match (OR).',
      additionalProperties: false,
      minProperties: 1,
      properties: {
        methods: {
          type: 'array',
          minItems: 1,
          items: { type: 'string', enum: HTTP_METHOD_NAMES },
          description: 'HTTP methods, e.g. [DELETE].',
        },
        tags: {
          type: 'array',
          minItems: 1,
          items: { type: 'string', minLength: 1 },
          description: 'OpenAPI tags.',
        },
        paths: {
          type: 'array',
          minItems: 1,
          items: { type: 'string', pattern: '^/' },
          description: 'Globs over path templates: `*` within one segment, `**` across segments.',
        },
        operation_ids: {
          type: 'array',
          minItems: 1,
          items: { type: 'string', minLength: 1 },
          description: 'Globs over operationIds: `*` matches anything.',
        },
      },
    },
    capabilityList: {
      type: 'array',
      description:
        'Capabilities, each given as a name, a glob over names (`get_*`; `*` matches anything) or a selector object. Every entry must match at least one capability.',
      items: {
        if: { type: 'string' },
        then: { type: 'string', minLength: 1, pattern: '^[a-z0-9_*?]+$' },
        else: { $ref: '#/$defs/selector' },
      },
    },
    publicJwk: {
      type: 'object',
      description: 'An Ed25519 public key as a JWK (RFC 8037). Never the private key.',
      additionalProperties: false,
      required: ['kty', 'crv', 'x'],
      properties: {
        kty: { type: 'string', enum: ['OKP'] },
        crv: { type: 'string', enum: ['Ed25519'] },
        x: {
          type: 'string',
          pattern: '^[A-Za-z0-9_-]{43}$',
          description: 'The 32-byte public key, base64url without padding.',
        },
        kid: { type: 'string', minLength: 1 },
        alg: { type: 'string', enum: ['EdDSA', 'Ed25519'] },
        use: { type: 'string', enum: ['sig'] },
        d: {
          description: 'Private key material: never given to the server (§8.1).',
          // A private key pasted here by mistake must not reach the error message (and CI logs).
          $comment: SECRET_MARK,
          not: {},
        },
      },
    },
  },
  properties: {
    modes: {
      type: 'array',
      description:
        'Agent modes the server supports (§2.2); registrations in other modes are refused with unsupported_mode.',
      minItems: 1,
      uniqueItems: true,
      items: { type: 'string', enum: ['delegated', 'autonomous'] },
      default: ['delegated'],
    },
    approval: {
      type: 'object',
      description: 'How users approve registrations and capability requests (§7).',
      additionalProperties: false,
      default: {},
      properties: {
        methods: {
          type: 'array',
          description:
            'Approval methods offered. device_authorization is required (§7.1); with ciba, CIBA is chosen when the client gives a login_hint (§7.5): a linked host only with its own user (or with preferred_method ciba and no hint: its user), a host linked to nobody with any hint, so the answer does not tell strangers who the approvers are (§7.2).',
          minItems: 1,
          uniqueItems: true,
          items: { type: 'string', enum: ['device_authorization', 'ciba'] },
          contains: { const: 'device_authorization' },
          default: ['device_authorization'],
        },
        expires_in: {
          $ref: '#/$defs/duration',
          description: 'Lifetime of an approval request.',
          default: '10m',
        },
        interval: {
          $ref: '#/$defs/duration',
          description: 'Polling interval advertised to clients (at least 1s, at most expires_in).',
          default: '5s',
        },
        approvers: {
          type: 'array',
          description:
            'User ids or emails the server can reach for CIBA: only they are notified and can decide a CIBA request; a login_hint naming none of them reaches nobody.',
          uniqueItems: true,
          items: { type: 'string', minLength: 1, maxLength: 256 },
          default: [],
        },
        verification_uri: {
          type: ['string', 'null'],
          description:
            "Where device authorization sends users (§7.1): your own approval portal, which decides through the operator API. null: the proxy's read-only page at {issuer}/device.",
          maxLength: 2048,
          default: null,
        },
        require_presence: {
          type: 'string',
          enum: ['data_changing', 'always'],
          description:
            "When approving on the proxy's pages needs proof of presence: a passkey assertion with user verification (§8.11). data_changing: capabilities whose method is not GET/HEAD or that capabilities.high_risk lists. always: every approval.",
          default: 'data_changing',
        },
        warn_names: {
          type: 'array',
          description:
            "Names the approval pages warn about when an agent's or host's name uses or imitates one, besides this service's provider_name and the built-in list of well-known brands: your company, your products, your partners.",
          maxItems: 50,
          uniqueItems: true,
          items: { type: 'string', minLength: 2, maxLength: 64 },
          default: [],
        },
        per_call_expires_in: {
          $ref: '#/$defs/duration',
          description:
            'How long a per-call approval (capabilities.per_call) waits for its approver before the call fails with approval_expired (§5.11).',
          default: '5m',
        },
        per_call_max_result_bytes: {
          type: 'integer',
          description:
            "Largest upstream result (UTF-8 JSON bytes) kept for a per-call approval's status URL; a larger one fails the call with payload_too_large.",
          minimum: 1024,
          maximum: 16777216,
          default: 262144,
        },
      },
    },
    lifetimes: {
      type: 'object',
      description:
        'Agent lifetime clocks (§2.4), JWT lifetime and clock skew (§8.2), pending cleanup (§10.9).',
      additionalProperties: false,
      default: {},
      properties: {
        session_ttl: {
          $ref: '#/$defs/optionalDuration',
          description: 'Sliding: an agent idle this long becomes expired. null disables.',
          default: '30m',
        },
        max_lifetime: {
          $ref: '#/$defs/optionalDuration',
          description: 'From the last activation: an agent active this long becomes expired. null disables.',
          default: '24h',
        },
        absolute_lifetime: {
          $ref: '#/$defs/optionalDuration',
          description: 'From creation: the agent is then revoked for good. null disables.',
          default: '30d',
        },
        max_jwt_lifetime: {
          $ref: '#/$defs/duration',
          description: 'Largest exp - iat accepted in host and agent JWTs.',
          default: '60s',
        },
        clock_skew: {
          $ref: '#/$defs/duration',
          description: 'Clock skew tolerated on exp and iat; at most 30s (§8.2).',
          default: '30s',
        },
        pending_cleanup: {
          $ref: '#/$defs/duration',
          description:
            'Pending agents and hosts older than this are deleted (§10.9); at least approval.expires_in.',
          default: '24h',
        },
      },
    },
    capabilities: {
      type: 'object',
      description: 'Capability classes. High-risk and blocked capabilities are never granted by default.',
      additionalProperties: false,
      default: {},
      properties: {
        defaults: {
          $ref: '#/$defs/capabilityList',
          description:
            'Granted without approval to delegated agents of hosts linked to a user (§2.9). High-risk and blocked capabilities are removed.',
          default: [],
        },
        high_risk: {
          $ref: '#/$defs/capabilityList',
          description: 'Never auto-approved, even for linked hosts (§8.10); wins over every default list.',
          default: [],
        },
        per_call: {
          $ref: '#/$defs/capabilityList',
          description:
            'Every execution waits for a person to approve its exact arguments with a passkey (§5.11 202 pending, then the status URL); same entry forms as high_risk.',
          default: [],
        },
        dpop: {
          $ref: '#/$defs/capabilityList',
          description:
            'Executing these (and reading their async or per-call outcomes) needs a DPoP-bound agent JWT: a cnf.jkt claim, "Authorization: DPoP" and a DPoP proof by that key (§4.4, RFC 9449); same entry forms as high_risk.',
          default: [],
        },
        blocked: {
          $ref: '#/$defs/capabilityList',
          description: 'Never listed and never grantable.',
          default: [],
        },
        // No default here: an omitted list means every capability (capability-lists.ts), which
        // a list in a file cannot say.
        public: {
          $ref: '#/$defs/capabilityList',
          description:
            'Listed and described without authentication (§5.2). Omitted: every capability (any self-signed host key may list them anyway); [] lists none.',
        },
        constraints: {
          type: 'object',
          description:
            'Server-imposed constraints (§2.13) per exact capability name: top-level input field → exact value or operator object (min, max, in, not_in). Intersected with what agents propose.',
          default: {},
          additionalProperties: { type: 'object', minProperties: 1 },
        },
      },
    },
    autonomous: {
      type: 'object',
      description: 'Autonomous agents (§2.2.2).',
      additionalProperties: false,
      default: {},
      properties: {
        grants: {
          $ref: '#/$defs/capabilityList',
          description:
            'Granted by policy to autonomous agents of unlinked hosts. High-risk and blocked capabilities are removed.',
          default: [],
        },
        bootstrap: {
          type: 'string',
          enum: ['operator', 'policy'],
          description:
            'An autonomous agent registering from a host nobody approved (§2.2.2 bootstrap). operator: it waits, pending, for the operator (§8.10). policy: the host is admitted by policy and the agent is active at once with the autonomous.grants it asked for; risky: every self-signed key gets those grants. Admitted hosts stay bounded by pending_hosts (max_hosts counts them, max_agents and max_open_approvals apply to each) and new ones by rate_limits.unknown_host_registration.',
          default: 'operator',
        },
      },
    },
    hosts: {
      type: 'array',
      description:
        'Pre-registered hosts (§2.8): created active at start-up if missing, kept in step otherwise.',
      default: [],
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['public_key'],
        properties: {
          name: { type: 'string', minLength: 1, maxLength: 128, description: 'Display name.' },
          public_key: { $ref: '#/$defs/publicJwk' },
          user_id: {
            type: 'string',
            minLength: 1,
            maxLength: 256,
            description: 'The user the host is linked to (§2.9); omit for an unlinked host.',
          },
          default_capabilities: {
            $ref: '#/$defs/capabilityList',
            description:
              "The host's default capabilities (§2.7). High-risk and blocked capabilities are removed.",
            default: [],
          },
        },
      },
    },
    rate_limits: {
      type: 'object',
      description: 'Rate limits (§8.13): "COUNT/DURATION" per window, or null to disable one.',
      additionalProperties: false,
      default: {},
      properties: {
        per_agent: { $ref: '#/$defs/rateLimit', description: 'Requests per agent.', default: '600/1m' },
        per_host: {
          $ref: '#/$defs/rateLimit',
          description: 'Requests of all agents under one host.',
          default: '1200/1m',
        },
        per_user: {
          $ref: '#/$defs/rateLimit',
          description: 'Requests of all agents linked to one user.',
          default: '3000/1m',
        },
        per_ip: {
          $ref: '#/$defs/rateLimit',
          description:
            'Unauthenticated requests per client IP, an IPv6 client counted by its /64 (discovery, listing, registration).',
          default: '120/1m',
        },
        unknown_host_registration: {
          $ref: '#/$defs/rateLimit',
          description:
            'POST /agent/register from unknown hosts, per client IP or IPv6 /64 (behind a load balancer, set server.trusted_proxies).',
          default: '20/10m',
        },
        approval_requests_per_user: {
          $ref: '#/$defs/rateLimit',
          description:
            "New approval requests (registration, capability request, reactivation) addressed to one user: the agent's or host's linked user, or a CIBA login_hint. Past it the agent gets 429 rate_limited and nothing is stored; a repeat of a still-pending request returns the same approval and is not counted.",
          default: '5/1m',
        },
        failed_auth_per_ip: {
          $ref: '#/$defs/rateLimit',
          description:
            'Failed authentications (agent, host, admin and introspection tokens) per client IP or IPv6 /64; once used up, that client is refused before any token is verified.',
          default: '60/1m',
        },
        per_capability: {
          type: 'object',
          description:
            'Executions per exact capability name: "COUNT/DURATION" over all agents, or {global, per_agent, per_host, per_user}.',
          default: {},
          additionalProperties: { $ref: '#/$defs/capabilityRateLimits' },
        },
        high_risk: {
          $ref: '#/$defs/capabilityRateLimits',
          description:
            'Executions of each high-risk capability (capabilities.high_risk; without a policy file, every method but GET and HEAD), each capability on its own budget: §8.13 asks for tighter limits there. A capability listed in per_capability keeps its own entry instead. null: none.',
          default: { per_agent: '60/1m' },
        },
        in_flight_per_agent: {
          $ref: '#/$defs/inFlightCap',
          description:
            'Upstream calls (executions, status polls, open streams) one agent may have running at once.',
          default: 16,
        },
        in_flight_per_host: {
          $ref: '#/$defs/inFlightCap',
          description: 'Upstream calls all agents under one host may have running at once.',
          default: 64,
        },
        in_flight_total: {
          $ref: '#/$defs/inFlightCap',
          description: 'Upstream calls the whole proxy may have running at once.',
          default: 256,
        },
      },
    },
    capability_requests: {
      type: 'object',
      description:
        'What one request (registration §5.3, request-capability §5.4) may ask the proxy to store. Over a bound: 400 invalid_request naming it.',
      additionalProperties: false,
      default: {},
      properties: {
        max_entries: {
          type: 'integer',
          minimum: 1,
          maximum: 10000,
          description: 'Entries in one capabilities list.',
          default: 100,
        },
        max_constraint_bytes: {
          type: 'integer',
          minimum: 64,
          maximum: 1048576,
          description: 'Serialized JSON size (UTF-8 bytes) of all constraints proposed in one request.',
          default: 8192,
        },
        max_constraint_depth: {
          type: 'integer',
          minimum: 1,
          maximum: 32,
          description:
            'Nesting depth of one proposed constraint value: an operator object is 1, a list inside it 2.',
          default: 8,
        },
      },
    },
    pending_hosts: {
      type: 'object',
      description:
        'Hosts nobody has approved yet (§2.11): what a self-signed key can make the proxy store. Their rows are deleted after lifetimes.pending_cleanup (§10.9).',
      additionalProperties: false,
      default: {},
      properties: {
        max_hosts: {
          type: 'integer',
          minimum: 1,
          description:
            'Hosts awaiting approval, in total; past it a new host gets 429 rate_limited until some are approved or cleaned up.',
          default: 1000,
        },
        max_agents: {
          type: 'integer',
          minimum: 1,
          description: 'Agents under one pending host; past it 403 host_pending.',
          default: 10,
        },
        max_open_approvals: {
          type: 'integer',
          minimum: 1,
          description: "Open approval requests across one pending host's agents; past it 403 host_pending.",
          default: 10,
        },
      },
    },
    replay: {
      type: 'object',
      description:
        'The jti replay cache (§4.6, §8.4): accepted JWT ids, in memory (bounded here) and journalled to the database so a restart forgets none.',
      additionalProperties: false,
      default: {},
      properties: {
        max_entries: {
          type: 'integer',
          minimum: 10,
          description:
            'Remembered JWT ids in total (about 200 bytes each, 600 at most). New identities are admitted below 90% of it; past it 503 temporarily_unavailable.',
          default: 200000,
        },
        max_entries_per_identity: {
          type: 'integer',
          minimum: 1,
          description:
            'Remembered JWT ids per identity (one agent, one host key) within their validity window; past it 429 rate_limited. At most max_entries.',
          default: 2000,
        },
      },
    },
    audit: {
      type: 'object',
      description: 'Activity records.',
      additionalProperties: false,
      default: {},
      properties: {
        log_arguments: {
          type: 'boolean',
          description: 'Store execution arguments in activity records (they may hold personal data).',
          default: false,
        },
      },
    },
  },
} as const;
