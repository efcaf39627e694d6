/**
 * JSON Schema of the proxy's YAML config (`--config`). Defaults live here; ajv fills them in.
 * `config/proxy.schema.json` is generated from this object (`npm run schema`) and a test keeps
 * the two in sync, so editors can validate configs too.
 */
import type { FromSchema } from 'json-schema-to-ts';
import { SECRET_MARK } from './validate.js';

const selector = {
  type: 'object',
  description: 'Matches operations: every key set must match (AND); any value in a list may match (OR).',
  additionalProperties: false,
  minProperties: 1,
  properties: {
    tags: { type: 'array', items: { type: 'string', minLength: 1 }, minItems: 1 },
    methods: {
      type: 'array',
      minItems: 1,
      items: { type: 'string', enum: ['GET', 'PUT', 'POST', 'DELETE', 'OPTIONS', 'HEAD', 'PATCH', 'TRACE'] },
    },
    operation_ids: { type: 'array', items: { type: 'string', minLength: 1 }, minItems: 1 },
    paths: { type: 'array', items: { type: 'string', pattern: '^/' }, minItems: 1 },
  },
} as const;

const httpUrl = { type: 'string', pattern: '^https?://[^\\s]+$' } as const;

const duration = {
  anyOf: [
    { type: 'string', pattern: '^[0-9]+(ms|s|m|h|d)$' },
    { type: 'integer', minimum: 0, description: 'seconds' },
  ],
} as const;

/**
 * A secret: read from an environment variable or a file (preferred: config files end up in
 * repositories), or given inline. Resolved once at start-up; a missing variable or file stops it.
 */
const secret = {
  // validate.ts never quotes a value under a schema marked so, in its messages.
  $comment: SECRET_MARK,
  anyOf: [
    { type: 'string', minLength: 1, description: 'inline value (prefer env or file)' },
    {
      type: 'object',
      additionalProperties: false,
      minProperties: 1,
      maxProperties: 1,
      properties: {
        env: { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_]*$' },
        file: { type: 'string', minLength: 1 },
        value: { type: 'string', minLength: 1 },
      },
    },
  ],
} as const;

/** Header names per RFC 9110 (token characters). */
const headerName = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";

/** Service credentials per security scheme, keyed by the scheme's name in the document. */
const credential = {
  // Secret as a whole: a value of the wrong kind (a numeric key YAML read as a number) fails the
  // object branches too, whose messages must not quote it either.
  $comment: SECRET_MARK,
  description:
    'apiKey and http bearer schemes take a secret; http basic takes {username, password}; oauth2 takes {client_id, client_secret, token_url?, scopes?, audience?} (client credentials flow).',
  anyOf: [
    secret,
    {
      type: 'object',
      additionalProperties: false,
      required: ['username', 'password'],
      properties: { username: secret, password: secret },
    },
    {
      type: 'object',
      additionalProperties: false,
      required: ['client_id', 'client_secret'],
      properties: {
        client_id: secret,
        client_secret: secret,
        token_url: httpUrl,
        scopes: { type: 'array', items: { type: 'string', minLength: 1 } },
        audience: { type: 'string', minLength: 1 },
      },
    },
  ],
} as const;

/** A pinned argument: a fixed JSON value, or the identity of the caller. */
const pinned = {
  anyOf: [
    {
      type: 'object',
      additionalProperties: false,
      required: ['from'],
      properties: { from: { enum: ['user_id', 'agent_id', 'host_id'] } },
    },
    { type: 'string' },
    { type: 'number' },
    { type: 'boolean' },
  ],
} as const;

const executionLimits = {
  timeout: { ...duration, description: 'Upstream request timeout (whole exchange).' },
  retries: { type: 'integer', minimum: 0, maximum: 5 },
  retry_backoff: { ...duration, description: 'First retry delay; doubles each retry.' },
  max_response_bytes: { type: 'integer', minimum: 1024, maximum: 1073741824 },
} as const;

/**
 * The most worker processes (`server.workers`, `--workers`): each opens its own PostgreSQL pools
 * (README "Workers"), so a typo of 600 for 6 is refused rather than exhausting the database.
 */
export const MAX_WORKERS = 64;

export const CONFIG_SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  $id: 'https://agent-auth-proxy.dev/schemas/proxy.schema.json',
  title: 'agent-auth-proxy configuration',
  type: 'object',
  additionalProperties: false,
  properties: {
    server: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        host: { type: 'string', minLength: 1, default: '127.0.0.1' },
        port: { type: 'integer', minimum: 0, maximum: 65535, default: 8080 },
        workers: {
          type: 'integer',
          minimum: 1,
          maximum: MAX_WORKERS,
          default: 1,
          description:
            'Processes serving the port (node:cluster). 1: one process, as without the key. More needs a PostgreSQL database: replay and rate state are shared only through it.',
        },
        issuer: { ...httpUrl, description: 'Public base URL of the proxy; default http://{host}:{port}.' },
        internal_port: {
          type: 'integer',
          minimum: 0,
          maximum: 65535,
          description:
            'Port of the internal listener (/metrics, /healthz, /readyz, /admin/); when set, /metrics and /admin/ are not served on the public port.',
        },
        internal_host: {
          type: 'string',
          minLength: 1,
          default: '127.0.0.1',
          description: 'Listen address of the internal listener (server.internal_port).',
        },
        max_body_bytes: { type: 'integer', minimum: 1024, maximum: 104857600, default: 1048576 },
        trusted_proxies: {
          type: 'array',
          description:
            'Addresses or CIDR ranges of load balancers in front of the proxy: only from these is the client address read from server.forwarded_header.',
          items: { type: 'string', minLength: 1 },
          default: [],
        },
        forwarded_header: {
          enum: ['x-forwarded-for', 'forwarded'],
          default: 'x-forwarded-for',
          description:
            'The header the trusted proxies write the client address into: X-Forwarded-For (nginx, HAProxy, cloud load balancers) or RFC 7239 Forwarded. Only that one is read: a balancer passes the other through as the client sent it.',
        },
        request_id_header: {
          type: 'string',
          pattern: headerName,
          default: 'x-request-id',
          description:
            "Header carrying the proxy's request id to the agent and the upstream. An operation's own header parameter of that name is the agent's: the proxy's id is then not sent upstream.",
        },
        max_connections: {
          type: 'integer',
          minimum: 1,
          description:
            'Open connections in total; a connection past it is answered 503 temporarily_unavailable (Retry-After: 1) and closed.',
          default: 1024,
        },
        max_connections_per_ip: {
          type: 'integer',
          minimum: 1,
          description:
            'Open connections per peer address, an IPv6 peer counted by its /64 (trusted proxies are exempt); a connection past it is answered 429 rate_limited (Retry-After: 1) and closed.',
          default: 64,
        },
        headers_timeout: {
          ...duration,
          description:
            'From connect to the end of the request headers; a silent connection is closed after it.',
          default: '10s',
        },
        request_timeout: {
          ...duration,
          description: 'From connect to the end of the request body.',
          default: '30s',
        },
        keep_alive_timeout: {
          ...duration,
          description: 'An idle keep-alive connection is closed after it.',
          default: '5s',
        },
        max_header_bytes: {
          type: 'integer',
          minimum: 1024,
          maximum: 1048576,
          description: 'Request line plus headers.',
          default: 16384,
        },
        shutdown_grace: {
          ...duration,
          description:
            'On SIGTERM: readiness turns 503 and new requests are refused at once; requests in progress get this long to finish before their connections are closed. Keep it below the orchestrator’s grace period (Kubernetes terminationGracePeriodSeconds, minus any preStop).',
          default: '25s',
        },
      },
    },
    provider: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        name: { type: 'string', pattern: '^[a-z0-9_-]{1,64}$' },
        description: { type: 'string', minLength: 1 },
      },
    },
    specs: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        allow_remote_refs: { type: 'boolean', default: false },
        allow_local_refs_anywhere: {
          type: 'boolean',
          default: false,
          description: "let a local document's $refs read files outside its own directory",
        },
        allow_http: { type: 'boolean', default: false },
        max_bytes: { type: 'integer', minimum: 1024, maximum: 104857600, default: 10485760 },
        timeout_ms: { type: 'integer', minimum: 100, maximum: 120000, default: 5000 },
      },
    },
    apis: {
      type: 'array',
      default: [],
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['spec'],
        properties: {
          id: { type: 'string', pattern: '^[a-z0-9_-]{1,64}$' },
          spec: {
            type: 'string',
            minLength: 1,
            description: 'File path (relative to this file) or http(s) URL.',
          },
          upstream: { ...httpUrl, description: "Base URL of the API; default: the document's servers." },
          prefix: { type: 'string', pattern: '^[a-z0-9_]{1,32}$' },
          include: { type: 'array', items: selector },
          exclude: { type: 'array', items: selector },
          server_variables: {
            type: 'object',
            description: "Values for the variables of the document's server URL (used without `upstream`).",
            additionalProperties: { type: 'string' },
          },
          credentials: {
            type: 'object',
            description: 'Service credentials by securitySchemes name; agents never see them.',
            additionalProperties: credential,
          },
          headers: {
            type: 'object',
            description: 'Static headers sent with every upstream request of this API.',
            propertyNames: { pattern: headerName },
            additionalProperties: secret,
          },
          identity_headers: {
            description:
              'Headers naming the acting agent, host and user (true: X-Agent-Id, X-Agent-Host-Id, X-Agent-User-Id).',
            anyOf: [
              { type: 'boolean' },
              {
                type: 'object',
                additionalProperties: false,
                minProperties: 1,
                properties: {
                  agent: { type: 'string', pattern: headerName },
                  host: { type: 'string', pattern: headerName },
                  user: { type: 'string', pattern: headerName },
                },
              },
            ],
          },
          ...executionLimits,
          operations: {
            type: 'object',
            description: 'Per-capability settings, keyed by capability name.',
            propertyNames: { pattern: '^[a-z0-9_]{1,64}$' },
            additionalProperties: {
              type: 'object',
              additionalProperties: false,
              properties: {
                timeout: duration,
                pin: {
                  type: 'object',
                  description: 'Arguments fixed by the operator: removed from the input schema, always sent.',
                  additionalProperties: pinned,
                },
              },
            },
          },
        },
      },
    },
    execution: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description:
        'Defaults for every API (each API may override timeout, retries, retry_backoff, max_response_bytes).',
      properties: {
        timeout: { ...duration, default: '30s' },
        retries: { type: 'integer', minimum: 0, maximum: 5, default: 2 },
        retry_backoff: { ...duration, default: '100ms' },
        max_response_bytes: { type: 'integer', minimum: 1024, maximum: 1073741824, default: 10485760 },
        stream_max_duration: { ...duration, default: '1h' },
        stream_revocation_check: { ...duration, default: '30s' },
        async_job_ttl: { ...duration, default: '24h' },
      },
    },
    audit: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description:
        'Activity records of executions (§11) are group-committed: queued, then written together in one transaction.',
      properties: {
        commit_window: {
          type: 'string',
          pattern: '^[0-9]+(ms|s)$',
          description:
            'Longest a record waits for its commit (1ms to 1s): a SIGKILL loses at most this much activity; SIGTERM loses none.',
          default: '20ms',
        },
        commit_max_records: {
          type: 'integer',
          minimum: 1,
          maximum: 10000,
          description: 'A batch this large is committed at once, without waiting for the window.',
          default: 256,
        },
        retention: {
          anyOf: [...duration.anyOf, { type: 'null' }],
          description:
            'How long activity records, and approval requests once closed, are kept (§9.2, §9.5: a request keeps its reason, binding message and login hint): older ones are deleted in small batches every minute. null keeps them forever.',
          default: '90d',
        },
      },
    },
    sign_in: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description:
        'Who may approve agents on the pages at {issuer}/device (§7.1, §8.11). With no local users, OIDC provider or trusted header, the pages are read-only and only the operator decides.',
      properties: {
        fresh_auth: {
          ...duration,
          description:
            'An approval needs a sign-in at most this old (§8.11); older sessions are asked again.',
          default: '5m',
        },
        session_lifetime: {
          ...duration,
          description: 'A signed-in session ends this long after sign-in, used or not.',
          default: '12h',
        },
        first_passkey: {
          type: 'string',
          enum: ['fresh_sign_in', 'operator_code'],
          description:
            "What a person's first passkey needs besides a fresh sign-in: nothing more (fresh_sign_in), or also a one-time enrolment code from the operator (operator_code: admin passkeys code), given out of band, so that an agent holding a saved password cannot enrol its own.",
          default: 'fresh_sign_in',
        },
        local: {
          type: 'object',
          additionalProperties: false,
          properties: {
            users: {
              type: 'array',
              maxItems: 1000,
              items: {
                type: 'object',
                additionalProperties: false,
                required: ['user_id', 'password_hash'],
                properties: {
                  user_id: { type: 'string', minLength: 1, maxLength: 200 },
                  password_hash: {
                    // A password pasted here by mistake must not be quoted back.
                    $comment: SECRET_MARK,
                    type: 'string',
                    pattern: '^scrypt\\$',
                    description:
                      'Printed by: agent-auth-proxy hash-password (reads the password from stdin).',
                  },
                  totp_secret: { ...secret, description: 'Base32 TOTP secret (RFC 6238): a second factor.' },
                },
              },
            },
          },
        },
        oidc: {
          type: 'object',
          additionalProperties: false,
          required: ['issuer', 'client_id', 'client_secret'],
          description:
            "The organisation's OpenID Connect provider: approvers sign in there (authorization code + PKCE, state, nonce). The provider must allow the redirect URI {issuer}/sign-in/oidc/callback (the proxy's issuer).",
          properties: {
            issuer: {
              ...httpUrl,
              description:
                "The provider's issuer identifier; its metadata is read from {issuer}/.well-known/openid-configuration. https, except on a loopback address (development).",
            },
            client_id: { type: 'string', minLength: 1, maxLength: 255 },
            client_secret: {
              ...secret,
              description: 'The client secret (sent with HTTP Basic to the token endpoint).',
            },
            name: {
              type: 'string',
              minLength: 1,
              maxLength: 60,
              description: 'Shown on the button "Sign in with {name}"; default: the issuer\'s host name.',
            },
            user_id_claim: {
              type: 'string',
              pattern: '^[A-Za-z0-9_.:-]{1,64}$',
              default: 'email',
              description:
                "The claim (ID token, else the userinfo endpoint) that becomes the approver's user_id.",
            },
            acr_values: {
              type: 'array',
              minItems: 1,
              maxItems: 20,
              items: { type: 'string', pattern: '^[\\x21-\\x7e]{1,200}$' },
              description:
                'Requested as acr_values; an ID token whose acr is not one of these is refused. Absent: every acr is accepted.',
            },
            scopes: {
              type: 'array',
              minItems: 1,
              maxItems: 20,
              items: { type: 'string', pattern: '^[\\x21\\x23-\\x5b\\x5d-\\x7e]{1,200}$' },
              default: ['openid', 'email', 'profile'],
              description: 'Scopes requested; must include openid.',
            },
          },
        },
        trusted_header: {
          type: 'object',
          additionalProperties: false,
          required: ['name', 'from'],
          description:
            'An authenticating proxy in front (oauth2-proxy, Pomerium) names the user in this header; believed only from these peer addresses.',
          properties: {
            name: { type: 'string', pattern: headerName },
            from: { type: 'array', minItems: 1, items: { type: 'string', minLength: 1 } },
          },
        },
      },
    },
    notifications: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description:
        'Telling approvers that a request waits for them (§7.2): a signed JSON webhook to your chat or mail system, carrying a link to the page where they decide, never a way to decide.',
      properties: {
        webhook: {
          type: 'object',
          additionalProperties: false,
          required: ['url', 'secret'],
          properties: {
            url: {
              ...secret,
              description:
                'Where each notification is POSTed: an http(s) URL. It may itself be a secret (chat webhook URLs often are): give {env} or {file}. Only its origin is ever logged.',
            },
            secret: {
              ...secret,
              description:
                'HMAC-SHA256 key for the X-AgentAuth-Signature header (at least 16 characters; prefer {env} or {file}). Never logged or sent.',
            },
            events: {
              type: 'array',
              minItems: 1,
              uniqueItems: true,
              items: { type: 'string', enum: ['ciba', 'device', 'per_call'] },
              description:
                'Which new approval requests are announced: ciba (addressed to one user, §7.2), device (device authorization, §7.1), per_call (one execution of a capabilities.per_call capability waiting for its approver).',
              default: ['ciba', 'per_call'],
            },
            timeout: { ...duration, description: 'Each attempt, connect to response.', default: '5s' },
            max_attempts: {
              type: 'integer',
              minimum: 1,
              maximum: 20,
              description:
                'Attempts per notification, the first included; then it is given up (logged, counted).',
              default: 6,
            },
            retry_backoff: {
              ...duration,
              description: 'Wait before the first retry; doubles each retry, up to max_backoff.',
              default: '1s',
            },
            max_backoff: { ...duration, description: 'Longest wait between two attempts.', default: '5m' },
            max_queue: {
              type: 'integer',
              minimum: 1,
              maximum: 100000,
              description:
                'Notifications waiting for delivery or a retry, in memory; when full the oldest is dropped (logged, counted).',
              default: 1000,
            },
          },
        },
      },
    },
    jwks: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description:
        'Fetching the keys of hosts and agents that register with a JWKS URL (§4.1) under the §8.12 protections.',
      properties: {
        allow_http: {
          type: 'boolean',
          default: false,
          description: 'Development only: accept http:// JWKS URLs (§8.12 requires https).',
        },
        allowed_cidrs: {
          type: 'array',
          items: { type: 'string', minLength: 1 },
          default: [],
          description:
            'Private, loopback or link-local addresses or CIDR ranges a JWKS URL may resolve to (refused otherwise, §8.12).',
        },
        ca_file: {
          type: 'string',
          minLength: 1,
          description:
            'PEM file of extra CA certificates trusted for JWKS URLs (relative to this file): for a private PKI. The system store is always trusted.',
        },
        timeout: {
          ...duration,
          default: '5s',
          description: 'One fetch, redirects included, from connect to the last byte.',
        },
        max_bytes: {
          type: 'integer',
          minimum: 1024,
          maximum: 1048576,
          default: 65536,
          description: 'Largest JWKS document; a larger one is refused.',
        },
        refresh_interval: {
          ...duration,
          default: '30s',
          description:
            'Least time between two fetches of one URL on a kid miss or after a failure (cached sets are otherwise kept 5 min to 24 h per Cache-Control).',
        },
      },
    },
    database: {
      type: 'string',
      minLength: 1,
      description:
        'SQLite file (relative to this file; default ./data/agent-auth-proxy.db in the working directory), or a postgres:// URL for PostgreSQL (several replicas share it).',
    },
    postgres: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'PostgreSQL connection settings, used when database is a postgres:// URL.',
      properties: {
        pool_size: {
          type: 'integer',
          minimum: 1,
          maximum: 100,
          default: 10,
          description:
            "Connections of each of a replica's two pools (state; the replay ledger and rate budgets every request uses), which also keeps one listening for the other replicas' changes.",
        },
        connection_timeout_ms: {
          type: 'integer',
          minimum: 100,
          maximum: 60000,
          default: 5000,
          description: 'How long a request waits for a connection before it is answered 503.',
        },
        statement_timeout_ms: {
          type: 'integer',
          minimum: 100,
          maximum: 600000,
          default: 5000,
          description: 'The server cancels a statement running longer (the request is answered 503).',
        },
        password_file: {
          type: 'string',
          minLength: 1,
          description:
            'File holding the database password (relative to this file), kept out of the URL; AGENT_AUTH_PROXY_DB_PASSWORD also works.',
        },
      },
    },
    policy: {
      type: 'string',
      minLength: 1,
      description: 'Policy YAML (relative to this file); see config/policy.example.yaml.',
    },
    admin_token_file: {
      type: 'string',
      minLength: 1,
      description: 'File holding the operator API token (enables /admin/).',
    },
    introspection_token_file: {
      type: 'string',
      minLength: 1,
      description: 'File holding the token resource servers use for POST /agent/introspect.',
    },
    mock_upstream: { type: 'boolean', default: false },
    log_level: { type: 'string', enum: ['debug', 'info', 'warn', 'error', 'silent'], default: 'info' },
    log_format: {
      type: 'string',
      enum: ['json', 'pretty'],
      default: 'json',
      description: 'json: one JSON object per line; pretty: human-readable text (development).',
    },
  },
} as const;

/**
 * The config file as ajv hands it over (defaults filled in, so defaulted keys are present).
 * Derived from the schema above, which is the one source of both the rules and the types.
 */
export type FileConfig = FromSchema<typeof CONFIG_SCHEMA>;
/** A secret as written in the config: inline, `{env}`, `{file}` or `{value}`. */
export type SecretConfig = NonNullable<FileConfig['apis'][number]['headers']>[string];
