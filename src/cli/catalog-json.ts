/**
 * `capabilities --json`: `{ capabilities, warnings }`, written in batches of small pieces so that
 * neither a large catalog (GitHub's 1,200 operations) nor a large capability (megabytes, in
 * Microsoft Graph's) ever becomes one string in memory (issue #14). The text is exactly what
 * `JSON.stringify(value, null, 2)` of the whole object would be.
 */
import { advertisedSchemas } from '../openapi/advertised-schemas.js';
import type { Catalog } from '../openapi/catalog.js';
import type { Capability } from '../openapi/types.js';
import { collectingWhenGrown } from '../util/collect-garbage.js';
import { emitJson } from '../util/json-pieces.js';
import type { CliOutput } from './output.js';

/**
 * Heap growth while writing after which a full collection runs (between two capabilities). The
 * pieces die young, but what the output stream holds until the reader takes it lives long enough
 * to be promoted, and V8 let that garbage grow: Microsoft Graph beta (22,361 capabilities, 2.4 GB
 * of text) peaked at 376 MiB with no collection of ours, 321 MiB with one per 64 MiB of growth,
 * 284 MiB per 32 (in 20 s, as many as before) and 270 MiB per 16 (in 30 s).
 */
const COLLECT_AFTER_GROWTH_BYTES = 32 * 1024 * 1024;

/** What the listing shows of a capability: the agent-facing parts and the operation it calls. */
export function capabilityEntry(c: Capability): Record<string, unknown> {
  return {
    name: c.name,
    description: c.description,
    ...advertisedSchemas(c),
    method: c.operation.method.toUpperCase(),
    path: c.operation.path,
  };
}

export async function writeCatalogJson(catalog: Catalog, io: CliOutput): Promise<void> {
  const { capabilities, warnings } = catalog;
  let batch = '';
  const emit = (piece: string): void => {
    batch += piece;
    if (batch.length >= WRITE_BATCH_CHARS) flush();
  };
  const flush = (): void => {
    if (batch.length > 0) io.out(batch);
    batch = '';
  };
  const collect = collectingWhenGrown(COLLECT_AFTER_GROWTH_BYTES);
  emit(capabilities.length === 0 ? '{\n  "capabilities": [],\n' : '{\n  "capabilities": [\n');
  for (const [i, c] of capabilities.entries()) {
    emit('    ');
    emitJson(capabilityEntry(c), emit, 2);
    emit(i === capabilities.length - 1 ? '\n  ],\n' : ',\n');
    flush();
    // Waits while the reader is behind, so unread text does not pile up in memory.
    await io.drained?.();
    collect();
  }
  emit(`  "warnings": `);
  emitJson(warnings, emit, 1);
  emit('\n}\n');
  flush();
  await io.drained?.();
}

/**
 * Characters given to the output at a time (at most; a capability's last batch is smaller). Small
 * enough to die young in V8's heap, large enough that writing is not call after call.
 */
export const WRITE_BATCH_CHARS = 16 * 1024;
