/** Writes config/proxy.schema.json from src/config/schema.ts (a test checks they agree). */
import { writeFileSync } from 'node:fs';
import { CONFIG_SCHEMA } from '../src/config/schema.js';

writeFileSync(
  new URL('../config/proxy.schema.json', import.meta.url),
  `${JSON.stringify(CONFIG_SCHEMA, null, 2)}\n`,
);
