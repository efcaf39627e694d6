/**
 * Child process of the corpus benchmark: loads one document into the catalog the proxy would
 * serve (the built dist/, as `serve` and `capabilities` do), then reports the time to that ready
 * catalog, the peak RSS up to then, and the largest capability by JSON.stringify length of its
 * input and output schemas. A fresh process per document, so memory is the document's own.
 */
import { loadServedCatalog } from '../dist/start/served-catalog.js';
import { resolveSettings } from '../dist/config/settings.js';
import process from 'node:process';
import { performance } from 'node:perf_hooks';

const file = process.argv[2];
const started = performance.now();
const { catalog } = await loadServedCatalog(resolveSettings({ specs: [file], port: 0 }));
const ms = performance.now() - started;
const maxRssKiB = process.resourceUsage().maxRSS;

let largest = { name: '', bytes: 0 };
let over256KiB = 0;
for (const c of catalog.capabilities) {
  const bytes =
    (c.input ? JSON.stringify(c.input).length : 0) + (c.output ? JSON.stringify(c.output).length : 0);
  if (bytes > 256 * 1024) over256KiB++;
  if (bytes > largest.bytes) largest = { name: c.name, bytes };
}
process.stdout.write(
  JSON.stringify({ ms, capabilities: catalog.capabilities.length, maxRssKiB, largest, over256KiB }) + '\n',
);
