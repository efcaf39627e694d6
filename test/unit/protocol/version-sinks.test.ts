/**
 * The hash sink of §2.12 versions: whatever the pieces, nesting and lengths it is written in, it
 * hashes exactly the text written, and a definition's remembered text replays exactly.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HashSink, TextTooLong } from '../../../src/protocol/version/sinks.js';

type Step = { readonly write: string } | { readonly begin: true } | { readonly end: true };

/** Text with surrogate pairs, some long enough to cross the sink's 64 Ki pieces. */
const text = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc
    .tuple(fc.string({ unit: 'binary', minLength: 1, maxLength: 8 }), fc.integer({ min: 1_000, max: 40_000 }))
    .map(([unit, times]) => unit.repeat(times).slice(0, 70_000)),
);

const program = fc.array(
  fc.oneof(
    { weight: 4, arbitrary: text.map((t): Step => ({ write: t })) },
    { weight: 1, arbitrary: fc.constant<Step>({ begin: true }) },
    { weight: 1, arbitrary: fc.constant<Step>({ end: true }) },
  ),
  { maxLength: 60 },
);

/** Runs `steps` into a fresh sink; returns the digest, the text, and each definition's text. */
function run(steps: readonly Step[]): { digest: string; whole: string; defs: [object, string][] } {
  const hash = createHash('sha256');
  const sink = new HashSink(hash, Infinity);
  let whole = '';
  const open: { def: object; from: number }[] = [];
  const defs: [object, string][] = [];
  for (const step of steps) {
    if ('write' in step) {
      sink.write(step.write);
      whole += step.write;
    } else if ('begin' in step) {
      sink.begin();
      open.push({ def: {}, from: whole.length });
    } else {
      const top = open.pop();
      if (top === undefined) continue;
      sink.end(top.def);
      defs.push([top.def, whole.slice(top.from)]);
    }
  }
  sink.finish();
  return { digest: hash.digest('hex'), whole, defs };
}

describe('HashSink', () => {
  it('hashes exactly the text written, and replays each definition it remembered as it was', () => {
    fc.assert(
      fc.property(program, (steps) => {
        const { digest, whole, defs } = run(steps);
        expect(digest).toBe(createHash('sha256').update(whole).digest('hex'));
        for (const [def, expected] of defs) {
          const replayHash = createHash('sha256');
          const replaying = new HashSink(replayHash, Infinity);
          if (!replaying.replay(def)) continue; // too long to remember, or past the total
          replaying.finish();
          expect(replayHash.digest('hex')).toBe(createHash('sha256').update(expected).digest('hex'));
        }
      }),
      { numRuns: 150 },
    );
  });

  it('keeps a surrogate pair whole when a definition begins between its halves', () => {
    // The pending text reaches a piece's length inside the definition, so all before it is
    // hashed: all but the high surrogate, which stays with its low half.
    const steps: Step[] = [
      { write: `${'a'.repeat(100)}\ud83d` },
      { begin: true },
      { write: `\ude00${'b'.repeat(70_000)}` },
      { end: true },
      { write: 'c' },
    ];
    const { digest, whole, defs } = run(steps);
    expect(digest).toBe(createHash('sha256').update(whole).digest('hex'));
    const [def, expected] = defs[0] as [object, string];
    const replayHash = createHash('sha256');
    const replaying = new HashSink(replayHash, Infinity);
    expect(replaying.replay(def)).toBe(true);
    replaying.finish();
    expect(replayHash.digest('hex')).toBe(createHash('sha256').update(expected).digest('hex'));
  });

  it('stops at its limit before writing past it', () => {
    const sink = new HashSink(createHash('sha256'), 10);
    sink.write('12345');
    expect(() => sink.write('678901')).toThrow(TextTooLong);
  });
});
