/**
 * `capabilities --json`: `{ capabilities, warnings }`, written one capability at a time so a large
 * catalog (GitHub's 1,200 operations) never becomes one string in memory (issue #14). The text is
 * exactly what `JSON.stringify(value, null, 2)` of the whole object would be.
 */
import type { Catalog } from '../openapi/catalog.js';
import type { Capability } from '../openapi/types.js';
import type { CliOutput } from './output.js';

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
  for (const [i, c] of capabilities.entries()) {
    const last = i === capabilities.length - 1;
    io.out(`${indent(JSON.stringify(capabilityEntry(c), null, 2), '    ')}${last ? '\n  ],\n' : ',\n'}`);
    // Waits while the reader is behind, so unread text does not pile up in memory.
    await io.drained?.();
  }
  io.out(`  "warnings": ${indent(JSON.stringify(warnings, null, 2), '  ').trimStart()}\n}\n`);
  await io.drained?.();
}

function indent(text: string, prefix: string): string {
  return text.replace(/^/gm, prefix);
}
