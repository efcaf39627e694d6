/**
 * The corpus benchmark's table: one line per document, each figure marked against its target of
 * issue 14 (✓ met, ✗ missed): the largest capability's input + output ≤ 256 KiB, peak RSS
 * ≤ 300 MiB (catalog, serve and capabilities --json), and for GitHub's 1,223 operations serve
 * ready in ≤ 1.0 s with ≤ 150 MiB.
 */
import type { CorpusRow, Outcome } from './corpus.js';

export const TARGETS = { capabilityKiB: 256, rssMiB: 300, githubServeMs: 1000, githubServeRssMiB: 150 };

const mark = (ok: boolean): string => (ok ? '✓' : '✗');

export function corpusHeader(): string {
  return (
    `corpus (fresh processes of dist/ per document and figure; ✓/✗ against issue 14's targets: largest ` +
    `capability input+output ≤ ${TARGETS.capabilityKiB} KiB, peak RSS ≤ ${TARGETS.rssMiB} MiB, GitHub's ` +
    `serve ready ≤ ${TARGETS.githubServeMs / 1000} s and ≤ ${TARGETS.githubServeRssMiB} MiB)\n` +
    `  ${'document'.padEnd(26)}${'flavour'.padEnd(13)}${'caps'.padStart(5)}${'MiB'.padStart(6)}` +
    `  ${'catalog: ms, peak RSS'.padEnd(24)}${'serve→discovery: ms, RSS'.padEnd(28)}` +
    `${'largest capability shown (KiB in+out)'.padEnd(72)}capabilities --json: RSS, output`
  );
}

export function corpusLine(row: CorpusRow): string {
  const github = row.id === 'github';
  const catalog = cell(row.catalog, (v) => `${ms(v.ms)} ${rss(v.maxRssMiB, TARGETS.rssMiB)}`);
  const serve = cell(row.serve, (v) => {
    const fast = github ? mark(v.ms <= TARGETS.githubServeMs) : '';
    const small = github ? TARGETS.githubServeRssMiB : TARGETS.rssMiB;
    return `${ms(v.ms)}${fast} ${rss(v.maxRssMiB, small)}`;
  });
  const largest = cell(row.catalog, (v) => {
    const over = v.over256KiB > 0 ? ` (${v.over256KiB} over)` : '';
    const summarized =
      v.summarized > 0 ? ` (${v.summarized} summarized; reached ${v.largestReached.kib.toFixed(0)})` : '';
    return `${v.largest.name.slice(0, 30)} ${v.largest.kib.toFixed(0)}${mark(v.largest.kib <= TARGETS.capabilityKiB)}${over}${summarized}`;
  });
  const json = cell(row.json, (v) => `${rss(v.maxRssMiB, TARGETS.rssMiB)} ${v.outputMiB.toFixed(1)} MiB`);
  const caps = row.catalog.ok ? String(row.catalog.value.capabilities) : '?';
  const line =
    `  ${row.id.padEnd(26)}${row.flavour.padEnd(13)}${caps.padStart(5)}${row.sizeMiB.toFixed(1).padStart(6)}` +
    `  ${catalog.padEnd(24)}${serve.padEnd(28)}${largest.padEnd(72)}${json}`;
  const errors = (
    [
      ['catalog', row.catalog],
      ['serve', row.serve],
      ['capabilities --json', row.json],
    ] as const
  )
    .filter(([, o]) => !o.ok)
    .map(([what, o]) => `\n    ${what} failed: ${o.ok ? '' : o.error}`);
  return line + errors.join('');
}

function cell<T>(outcome: Outcome<T>, format: (value: T) => string): string {
  return outcome.ok ? format(outcome.value) : 'FAILED';
}

const ms = (value: number): string => `${value.toFixed(0)} ms`;

function rss(mib: number, target: number): string {
  return Number.isFinite(mib) ? `${mib.toFixed(0)} MiB${mark(mib <= target)}` : 'RSS n/a';
}
