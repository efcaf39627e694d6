/**
 * Child process of the corpus benchmark: loads one document into the catalog the proxy would
 * serve (the built dist/, as `serve` and `capabilities` do), then reports the time to that ready
 * catalog, the peak RSS up to then, and the largest capability by JSON.stringify length of its
 * input and output schemas: as agents are shown them (advertised-schemas.ts), and as reached
 * from the document with every component whole. A fresh process per document, so memory is the
 * document's own.
 */
import { loadServedCatalog } from '../dist/start/served-catalog.js';
import { resolveSettings } from '../dist/config/settings.js';
import { advertisedSchemas } from '../dist/openapi/advertised-schemas.js';
import process from 'node:process';
import { performance } from 'node:perf_hooks';

const file = process.argv[2];
const started = performance.now();
const { catalog } = await loadServedCatalog(resolveSettings({ specs: [file], port: 0 }));
const ms = performance.now() - started;
const maxRssKiB = process.resourceUsage().maxRSS;

const chars = ({ input, output }) =>
  (input ? JSON.stringify(input).length : 0) + (output ? JSON.stringify(output).length : 0);
let largest = { name: '', bytes: 0 };
let largestReached = { name: '', bytes: 0 };
let over256KiB = 0;
let summarized = 0;
for (const c of catalog.capabilities) {
  const reached = chars(c);
  const shown = advertisedSchemas(c);
  const bytes = shown.input === c.input && shown.output === c.output ? reached : chars(shown);
  if (bytes !== reached) summarized++;
  if (bytes > 256 * 1024) over256KiB++;
  if (bytes > largest.bytes) largest = { name: c.name, bytes };
  if (reached > largestReached.bytes) largestReached = { name: c.name, bytes: reached };
}
process.stdout.write(
  JSON.stringify({
    ms,
    capabilities: catalog.capabilities.length,
    maxRssKiB,
    largest,
    largestReached,
    summarized,
    over256KiB,
  }) + '\n',
);
