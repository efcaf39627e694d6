/**
 * §2.12 versions across the issue #14 layout change: components moved from inlined copies to the
 * root's `$defs`, and the version must not move with them, or an upgrade would suspend every grant
 * of every capability that uses a component. The versions in the fixture were computed by the
 * build before the change (components inlined); the current build must compute the same.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadCatalog } from '../../../src/openapi/load-catalog.js';
import type { LoadOptions } from '../../../src/openapi/load.js';
import { capabilityVersion } from '../../../src/protocol/capability-version.js';
import { CORPUS_DIR, corpusDocuments } from '../../helpers/corpus.js';

const SPECS = fileURLToPath(new URL('../../fixtures/specs/version/', import.meta.url));
const LOCAL_ONLY: LoadOptions = { allowRemoteRefs: false, allowHttp: false };

interface Fixture {
  readonly corpus: Record<string, Record<string, string>>;
  readonly specs: Record<string, Record<string, string>>;
}
const fixture = JSON.parse(readFileSync(`${SPECS}pre-14-versions.json`, 'utf8')) as Fixture;

async function versionsOf(
  spec: string,
  id: string,
  names: readonly string[],
): Promise<Record<string, string>> {
  const catalog = await loadCatalog([{ spec, id }], LOCAL_ONLY);
  const out: Record<string, string> = {};
  for (const name of names) {
    const capability = catalog.get(name);
    if (capability) out[name] = capabilityVersion(capability);
  }
  return out;
}

describe('capability versions equal those of the inlining build (upgrade from before issue #14)', () => {
  const documents = corpusDocuments();
  for (const [id, expected] of Object.entries(fixture.corpus)) {
    it(`corpus ${id}`, async () => {
      const entry = documents.find((d) => d.id === id);
      expect(entry, id).toBeDefined();
      const spec = `${CORPUS_DIR}${entry?.entry}`;
      expect(await versionsOf(spec, id, Object.keys(expected))).toEqual(expected);
    });
  }

  // Nullable references, a parameter example beside a component's own, aliases, cycles, booleans;
  // examples over 8 KiB, which capability schemas leave out (versions of large-examples-*.yaml were
  // computed by the build before that bound, which the tests above hold to the inlining build's).
  for (const [file, expected] of Object.entries(fixture.specs)) {
    it(`spec ${file}`, async () => {
      expect(await versionsOf(`${SPECS}${file}`, file, Object.keys(expected))).toEqual(expected);
    });
  }
});

describe('the large-examples fixtures', () => {
  for (const file of ['large-examples-30.yaml', 'large-examples-31.yaml']) {
    it(`${file}: every example over 8 KiB is left out of the schemas, with a warning`, async () => {
      const catalog = await loadCatalog([{ spec: `${SPECS}${file}`, id: file }], LOCAL_ONLY);
      const leftOut = catalog.warnings.filter((w) => w.includes('left out an example'));
      expect(leftOut).toHaveLength(8);
      for (const capability of catalog.capabilities) {
        const text = JSON.stringify([capability.input, capability.output]);
        expect(text.length, capability.name).toBeLessThan(8 * 1024);
        expect(text, capability.name).not.toContain('lorem');
      }
    });
  }
});
