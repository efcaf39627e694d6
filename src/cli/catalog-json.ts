/**
 * `capabilities --json`: `{ capabilities, warnings }`, written one capability at a time so a large
 * catalog (GitHub's 1,200 operations) never becomes one string in memory (issue #14). The text is
 * exactly what `JSON.stringify(value, null, 2)` of the whole object would be.
 */
import type { Catalog } from '../openapi/catalog.js';
import type { Capability } from '../openapi/types.js';
import { collectingWhenGrown } from '../util/collect-garbage.js';
import type { CliOutput } from './output.js';

/**
 * When a full collection runs while writing. Each capability's text is garbage once written, and
 * V8 lets garbage grow to about four times the live heap before it collects on its own: Microsoft
 * Graph's 11,422 capabilities (780 MB of text over an 80 MB catalog) peaked at 469 MiB that way,
 * and at 240 MiB with a collection per 64 Mi characters written. Text with a character past
 * Latin-1 takes two bytes a character, so Microsoft Graph beta (22,361 capabilities) still made
 * twice that garbage between collections and peaked at 402 MiB: a collection also follows 64 MiB
 * of growth in the memory JavaScript uses. Growth alone kept Graph's at 267-273 MiB: V8's own
 * collections reset what it measures from without keeping the peak down.
 */
const COLLECT_EVERY_CHARS = 64 * 1024 * 1024;
const COLLECT_AFTER_GROWTH_BYTES = 64 * 1024 * 1024;

/** What the listing shows of a capability: the agent-facing parts and the operation it calls. */
export function capabilityEntry(c: Capability): Record<string, unknown> {
  return {
    name: c.name,
    description: c.description,
    ...(c.input ? { input: c.input } : {}),
    ...(c.output ? { output: c.output } : {}),
    method: c.operation.method.toUpperCase(),
    path: c.operation.path,
  };
}

export async function writeCatalogJson(catalog: Catalog, io: CliOutput): Promise<void> {
  const { capabilities, warnings } = catalog;
  io.out(capabilities.length === 0 ? '{\n  "capabilities": [],\n' : '{\n  "capabilities": [\n');
  let sinceCollection = 0;
  const collect = collectingWhenGrown(COLLECT_AFTER_GROWTH_BYTES);
  for (const [i, c] of capabilities.entries()) {
    const last = i === capabilities.length - 1;
    const text = nestedTwice(capabilityEntry(c));
    io.out(`${text}${last ? '\n  ],\n' : ',\n'}`);
    // Waits while the reader is behind, so unread text does not pile up in memory.
    await io.drained?.();
    sinceCollection += text.length;
    if (collect(sinceCollection >= COLLECT_EVERY_CHARS)) sinceCollection = 0;
  }
  io.out(`  "warnings": ${JSON.stringify([warnings], null, 2).slice(4, -2)}\n}\n`);
  await io.drained?.();
}

/**
 * The entry as it reads two levels down in the whole document (`{ "capabilities": [ … ] }`):
 * stringified inside two arrays, which indents it by four spaces, then cut out of them. One string
 * per capability, where indenting afterwards made a second copy of every (often large) one.
 */
function nestedTwice(entry: Record<string, unknown>): string {
  const text = JSON.stringify([[entry]], null, 2);
  // `[\n  [\n    {…}\n  ]\n]`: the entry's line starts after the first 6 characters and ends 6
  // before the end.
  return text.slice(6, -6);
}
