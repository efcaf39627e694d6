/** `capabilities [--json]`: the catalog serve would serve, as a table or as streamed JSON. */
import { resolveSettings, type CliOverrides } from '../config/settings.js';
import type { Catalog } from '../openapi/catalog.js';
import { loadServedCatalog } from '../start/served-catalog.js';
import { writeCatalogJson } from './catalog-json.js';
import type { CliOutput } from './output.js';

export async function printCapabilities(cli: CliOverrides, json: boolean, io: CliOutput): Promise<number> {
  const { catalog } = await loadServedCatalog(resolveSettings(cli));
  if (json) {
    await writeCatalogJson(catalog, io);
    return 0;
  }
  io.out(catalogTable(catalog));
  for (const w of catalog.warnings) io.err(`warning: ${w}\n`);
  return 0;
}

function catalogTable(catalog: Catalog): string {
  const rows = catalog.capabilities.map((c) => [
    c.name,
    c.operation.method.toUpperCase(),
    c.operation.path,
    (c.description.split('\n')[0] ?? '').slice(0, 60),
  ]);
  const header = ['NAME', 'METHOD', 'PATH', 'DESCRIPTION'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] as number)))
      .join('  ')
      .trimEnd();
  const apis = catalog.apis.length;
  return [
    line(header),
    ...rows.map(line),
    '',
    `${rows.length} capabilities from ${apis} API${apis === 1 ? '' : 's'}`,
    '',
  ].join('\n');
}
