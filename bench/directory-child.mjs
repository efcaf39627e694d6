/**
 * Child process of the directory sweep (bench/directory.ts): for each document named on the
 * command line, loads it as `serve` would (the built dist/), derives its catalog, and compiles
 * every capability's arguments, input and output schema with the strict validator the proxy
 * uses, within COMPILE_BUDGET_MS per document, and the summarized forms agents are shown of the
 * capabilities over 256 KiB (advertised-schemas.ts). One JSON line per document on stdout.
 */
import { loadDocument } from '../dist/openapi/load.js';
import { deriveCatalog } from '../dist/openapi/derive.js';
import { createSchemaValidator } from '../dist/openapi/ajv.js';
import { advertisedSchemas } from '../dist/openapi/advertised-schemas.js';
import process from 'node:process';
import { performance } from 'node:perf_hooks';

const COMPILE_BUDGET_MS = Number(process.env.AAP_DIRECTORY_COMPILE_BUDGET_MS ?? 60_000);
const MAX_ERRORS = 5;
const LARGE_BYTES = 256 * 1024;

for (const file of process.argv.slice(2)) {
  const started = performance.now();
  const row = { file };
  try {
    const { doc } = await loadDocument(file, { allowRemoteRefs: false, allowHttp: false });
    const catalog = deriveCatalog([{ source: file, doc }]);
    row.deriveMs = Math.round(performance.now() - started);
    row.operations = catalog.capabilities.length;
    row.warnings = catalog.warnings.length;
    Object.assign(row, compileAll(catalog));
  } catch (err) {
    row.error = String(err?.message ?? err).slice(0, 500);
  }
  row.ms = Math.round(performance.now() - started);
  process.stdout.write(JSON.stringify(row) + '\n');
}

function compileAll(catalog) {
  const validator = createSchemaValidator(catalog.formats);
  const started = performance.now();
  const out = {
    schemas: 0,
    compiled: 0,
    refused: 0,
    compileErrors: [],
    // As agents are shown them, and as reached with every component whole.
    largest: { name: '', bytes: 0 },
    over256KiB: 0,
    largestReached: { name: '', bytes: 0 },
    reachedOver256KiB: 0,
  };
  const chars = ({ input, output }) =>
    (input ? JSON.stringify(input).length : 0) + (output ? JSON.stringify(output).length : 0);
  for (const c of catalog.capabilities) {
    const reached = chars(c);
    const shown = advertisedSchemas(c);
    const summarized = shown.input !== c.input || shown.output !== c.output;
    const bytes = summarized ? chars(shown) : reached;
    if (bytes > out.largest.bytes) out.largest = { name: c.name, bytes };
    if (bytes > LARGE_BYTES) out.over256KiB++;
    if (reached > out.largestReached.bytes) out.largestReached = { name: c.name, bytes: reached };
    if (reached > LARGE_BYTES) out.reachedOver256KiB++;
    for (const [part, schema] of [
      ['arguments', c.argumentsSchema],
      ['input', c.input],
      ['output', c.output],
      ['shown input', shown.input !== c.input ? shown.input : undefined],
      ['shown output', shown.output !== c.output ? shown.output : undefined],
    ]) {
      if (!schema) continue;
      out.schemas++;
      if (performance.now() - started > COMPILE_BUDGET_MS) continue;
      try {
        validator.compile(schema);
        out.compiled++;
      } catch (err) {
        out.refused++;
        if (out.compileErrors.length < MAX_ERRORS)
          out.compileErrors.push(`${c.name} ${part}: ${err.message}`);
      }
    }
  }
  return out;
}
