/**
 * Writes config/proxy.schema.json and config/policy.schema.json from their TypeScript sources
 * (tests check they agree), so editors can validate both YAML files.
 */
import { writeFileSync } from 'node:fs';
import { CONFIG_SCHEMA } from '../src/config/schema.js';
import { POLICY_SCHEMA } from '../src/policy/schema.js';

for (const [file, schema] of [
  ['proxy.schema.json', CONFIG_SCHEMA],
  ['policy.schema.json', POLICY_SCHEMA],
] as const) {
  writeFileSync(new URL(`../config/${file}`, import.meta.url), `${JSON.stringify(schema, null, 2)}\n`);
}
