import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EventRedactor, MAX_EVENT_DEPTH } from '../../../src/upstream/event-redaction.js';
import { secretForms } from '../../../src/upstream/secret-forms.js';

const SECRET = 'sk-live-0123456789abcdefghij';
const forms = [secretForms(SECRET)];
/** At most a quarter of the form (capped at 8) minus one leading characters may pass. */
const LEAK = 7;

function noWindowOfSecret(text: string): void {
  for (let i = 0; i + LEAK <= SECRET.length; i++) {
    expect(text, SECRET.slice(i, i + LEAK)).not.toContain(SECRET.slice(i, i + LEAK));
  }
}

describe('EventRedactor: a secret cut across events (issue 10, class 12)', () => {
  it('whatever the cuts, joining the relayed data never gives 7 characters of the secret', () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 20 }),
        fc.string({ maxLength: 20 }),
        fc.uniqueArray(fc.integer({ min: 1, max: SECRET.length + 39 }), { maxLength: 12 }),
        (before, after, cuts) => {
          fc.pre(!before.includes('sk') && !after.includes('sk'));
          const text = `${before}${SECRET}${after}`;
          const points = [0, ...cuts.filter((c) => c < text.length).sort((a, b) => a - b), text.length];
          const redactor = new EventRedactor(() => forms);
          const out = points
            .slice(1)
            .map((end, i) => redactor.event({ data: text.slice(points[i], end) }).data)
            .join('');
          noWindowOfSecret(out);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('JSON events are joined per field: deltas carry no secret, other fields are untouched', () => {
    const redactor = new EventRedactor(() => forms);
    const parts = [SECRET.slice(0, 9), SECRET.slice(9, 18), SECRET.slice(18)];
    const out = parts.map(
      (delta, i) => redactor.event({ data: JSON.stringify({ i, delta, id: `e${i}` }) }).data,
    );
    const parsed = out.map((d) => JSON.parse(d) as { i: number; delta: string; id: string });
    noWindowOfSecret(parsed.map((p) => p.delta).join(''));
    expect(parsed.map((p) => p.id)).toEqual(['e0', 'e1', 'e2']);
    expect(parsed.map((p) => p.i)).toEqual([0, 1, 2]);
  });

  it('ordinary streams pass unchanged, ids included', () => {
    const redactor = new EventRedactor(() => forms);
    const events = Array.from({ length: 300 }, (_, i) => ({ data: `token ${i} sk`, id: String(i) }));
    for (const e of events) expect(redactor.event(e)).toEqual(e);
  });

  it('a secret cut across event ids is redacted where it completes', () => {
    const redactor = new EventRedactor(() => forms);
    const first = redactor.event({ data: 'a', id: SECRET.slice(0, 14) });
    const second = redactor.event({ data: 'b', id: SECRET.slice(14) });
    expect(`${first.id ?? ''}${second.id ?? ''}`).not.toContain(SECRET);
    expect(second.id).toBe('[redacted]');
  });
});

/** Every string an agent receives in an event's data, in order: the data, or its JSON strings. */
function strings(data: string): string[] {
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return [data];
  }
  const out: string[] = [];
  const walk = (v: unknown): void => {
    if (typeof v === 'string') out.push(v);
    else if (v !== null && typeof v === 'object') Object.values(v).forEach(walk);
  };
  walk(value);
  return out;
}

describe('EventRedactor: pieces of a secret in different channels', () => {
  it('plain data then a JSON member: the member that completes the secret is redacted', () => {
    const redactor = new EventRedactor(() => forms);
    const first = redactor.event({ data: `plain ${SECRET.slice(0, 6)}` }).data;
    const second = redactor.event({ data: JSON.stringify({ k: SECRET.slice(6) }) }).data;
    noWindowOfSecret([first, ...strings(second)].join(''));
  });

  it('whatever the cuts and wherever each piece goes (plain data, any field), the joined strings never give 7 characters', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: SECRET.length - 1 }), { maxLength: 8 }),
        fc.array(fc.oneof(fc.constant(null), fc.constantFrom('a', 'b', 'delta')), {
          minLength: 9,
          maxLength: 9,
        }),
        (cuts, places) => {
          const points = [0, ...cuts.sort((a, b) => a - b), SECRET.length];
          const redactor = new EventRedactor(() => forms);
          const received = points.slice(1).flatMap((end, i) => {
            const piece = SECRET.slice(points[i], end);
            const field = places[i] ?? null;
            const data = field === null ? piece : JSON.stringify({ [field]: piece });
            return strings(redactor.event({ data }).data);
          });
          noWindowOfSecret(received.join(''));
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('EventRedactor: JSON depth', () => {
  const nested = (depth: number, leaf: string): string =>
    '{"k":'.repeat(depth - 1) + JSON.stringify({ k: leaf }) + '}'.repeat(depth - 1);

  it(`a secret split across members ${MAX_EVENT_DEPTH} levels down is redacted where it completes`, () => {
    const redactor = new EventRedactor(() => forms);
    const first = redactor.event({ data: nested(MAX_EVENT_DEPTH, SECRET.slice(0, 14)) }).data;
    const second = redactor.event({ data: nested(MAX_EVENT_DEPTH, SECRET.slice(14)) }).data;
    noWindowOfSecret([...strings(first), ...strings(second)].join(''));
  });

  it(`an event nested deeper than ${MAX_EVENT_DEPTH} levels is refused (the stream ends), not relayed unwalked`, () => {
    const redactor = new EventRedactor(() => forms);
    expect(() => redactor.event({ data: nested(MAX_EVENT_DEPTH + 1, 'x') })).toThrow(/nested more than 64/);
  });
});
