/**
 * The policy file as text → the object the schema leaves (defaults filled in). YAML errors and
 * schema errors become one UserError; the schema errors that ajv would report as a tangle of
 * `anyOf` branches are rewritten as one sentence each.
 */
import { readFileSync } from 'node:fs';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { schemaDefaults } from '../config/schema-defaults.js';
import { keyPath, lazyConfigSchema, quotable, validateOrThrow } from '../config/validate.js';
import { parseYamlText } from '../config/yaml-text.js';
import { UserError } from '../errors.js';
import { POLICY_SCHEMA } from './schema.js';
import type { PolicyFile } from './types.js';

const validatePolicySchema = lazyConfigSchema(POLICY_SCHEMA);

export function readPolicyText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    throw new UserError(`${file}: policy file not found or not readable`);
  }
}

/** No policy file: `{}` with the schema's defaults, as parsePolicyFile('{}') gives, without compiling it. */
export function defaultPolicyFile(): PolicyFile {
  return schemaDefaults(POLICY_SCHEMA) as PolicyFile;
}

/** Parses YAML text (`file` is for messages) and checks it against POLICY_SCHEMA. */
export function parsePolicyFile(text: string, file: string): PolicyFile {
  const data = parseYamlText(text, file);
  checkSchema(data, file);
  return data as PolicyFile;
}

const DURATION_EXPECTED =
  'must be a duration: a whole number with a unit s, m, h or d ("30s", "10m", "24h", "30d"), or a whole number of seconds';

/**
 * Errors that read better as one sentence than as ajv's per-branch complaints. Keyed by the
 * schema object (ajv reports it as `parentSchema`) and keyword; the anchor's sub-errors (its
 * `anyOf` branches, its `contains` item checks) are dropped.
 */
const EXPECTED: readonly (readonly [schema: object, keyword: string, message: string])[] = [
  [POLICY_SCHEMA.$defs.duration, 'anyOf', DURATION_EXPECTED],
  [POLICY_SCHEMA.$defs.optionalDuration, 'anyOf', `${DURATION_EXPECTED}, or null to disable`],
  [
    POLICY_SCHEMA.$defs.rateLimit,
    'anyOf',
    'must be a rate limit "COUNT/DURATION" with COUNT >= 1, e.g. "60/1m" or "5/1h", or null to disable',
  ],
  [
    POLICY_SCHEMA.$defs.inFlightCap,
    'anyOf',
    'must be a whole number of upstream calls at once, from 1 to 1000000, or null to disable',
  ],
  [
    POLICY_SCHEMA.$defs.capabilityList.items.then,
    'pattern',
    'must be a capability name or a glob over names: lowercase letters, digits, "_", and "*" or "?" as wildcards',
  ],
  [
    POLICY_SCHEMA.$defs.publicJwk.properties.x,
    'pattern',
    'must be the 32-byte Ed25519 public key in base64url without padding (43 characters)',
  ],
  [
    POLICY_SCHEMA.$defs.publicJwk.properties.d,
    'not',
    'is private key material: give only the public key (kty, crv, x); the server never holds private keys (§8.1)',
  ],
  [
    POLICY_SCHEMA.properties.approval.properties.methods,
    'contains',
    'must include "device_authorization": every server supports device authorization (§7.1)',
  ],
];

function checkSchema(data: unknown, file: string): void {
  const validate = validatePolicySchema();
  if (validate(data)) return;
  const errors = validate.errors ?? [];
  const anchors = new Map<ErrorObject, string>();
  for (const e of errors) {
    const hit = EXPECTED.find(([schema, keyword]) => e.parentSchema === schema && e.keyword === keyword);
    if (hit) anchors.set(e, hit[2]);
  }
  const covered = (e: ErrorObject): boolean =>
    [...anchors.keys()].some((a) => a !== e && e.schemaPath.startsWith(`${a.schemaPath}/`));
  const lines: string[] = [];
  for (const e of errors) {
    const expected = anchors.get(e);
    if (expected !== undefined) {
      lines.push(`${file}: ${keyPath(e)}: ${expected}${quotable(e, validate.schema)}`);
    } else if (!covered(e)) {
      lines.push(...describeErrors([e], data, file));
    }
  }
  throw new UserError([...new Set(lines)].join('\n'));
}

/** The config loader's wording for ordinary schema errors, replayed through validateOrThrow. */
function describeErrors(errors: ErrorObject[], data: unknown, file: string): string[] {
  const replay = Object.assign(() => false, { errors }) as unknown as ValidateFunction;
  try {
    validateOrThrow(replay, data, file);
  } catch (err) {
    if (err instanceof UserError) return err.message.split('\n').filter(Boolean);
    throw err;
  }
  return [];
}
