/**
 * JSON Schema of the proxy's YAML config (`--config`). Defaults live here; ajv fills them in.
 * `config/proxy.schema.json` is generated from this object (`npm run schema`) and a test keeps
 * the two in sync, so editors can validate configs too.
 */
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
        issuer: { ...httpUrl, description: 'Public base URL of the proxy; default http://{host}:{port}.' },
        max_body_bytes: { type: 'integer', minimum: 1024, maximum: 104857600, default: 1048576 },
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
        },
      },
    },
    database: {
      type: 'string',
      minLength: 1,
      description:
        'SQLite file (relative to this file); default ./data/agent-auth-proxy.db in the working directory.',
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
  },
} as const;
