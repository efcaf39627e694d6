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

/** Text with its %XX, \uXXXX and \xXX escapes decoded, as an agent would undo them. */
function unescaped(text: string): string {
  const char = (_m: string, h: string): string => String.fromCharCode(parseInt(h, 16));
  return text
    .replace(/%([0-9A-Fa-f]{2})/g, char)
    .replace(/\\u([0-9A-Fa-f]{4})/g, char)
    .replace(/\\x([0-9A-Fa-f]{2})/g, char);
}

describe('EventRedactor: regressions (pieces the channels did not join)', () => {
  it('JSON object keys: a secret cut across the keys of two events is joined and redacted', () => {
    const redactor = new EventRedactor(() => forms);
    const out = [SECRET.slice(0, 14), SECRET.slice(14)].map(
      (piece) => redactor.event({ data: JSON.stringify({ [piece]: 1 }) }).data,
    );
    const keys = out.map((d) => Object.keys(JSON.parse(d) as object).join(''));
    noWindowOfSecret(keys.join(''));
    expect(out.map((d) => Object.values(JSON.parse(d) as Record<string, number>))).toEqual([[1], [1]]);
  });

  it('a key then the value after it: the pair is joined in wire order', () => {
    const redactor = new EventRedactor(() => forms);
    const data = redactor.event({ data: JSON.stringify({ [SECRET.slice(0, 10)]: SECRET.slice(10) }) }).data;
    const [[key, value]] = Object.entries(JSON.parse(data) as Record<string, string>) as [[string, string]];
    noWindowOfSecret(`${key}${value}`);
  });

  it('numbers: a secret of digits cut across numeric members is redacted, the number replaced whole', () => {
    const digits = '4111222233334444';
    const redactor = new EventRedactor(() => [secretForms(digits)]);
    const out = [digits.slice(0, 8), digits.slice(8)].map(
      (n) => JSON.parse(redactor.event({ data: JSON.stringify({ n: Number(n) }) }).data) as { n: unknown },
    );
    expect(out[1]?.n).toBe('[redacted]');
    expect(out.map((o) => String(o.n)).join('')).not.toContain(digits);
  });

  it('a percent-escape in the first piece: the second piece is redacted, the first withheld', () => {
    const redactor = new EventRedactor(() => forms);
    const escaped = `%73${SECRET.slice(1)}`;
    const out = [escaped.slice(0, 12), escaped.slice(12)].map((data) => redactor.event({ data }).data);
    noWindowOfSecret(unescaped(out.join('')));
  });

  it('whatever the cuts and whichever characters are escaped (%XX, \\uXXXX, \\xXX, %25XX), the decoded joined data never gives 7 characters', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom('plain', 'percent', 'unicode', 'byte', 'twice'), {
          minLength: SECRET.length,
          maxLength: SECRET.length,
        }),
        fc.uniqueArray(fc.integer({ min: 1, max: 6 * SECRET.length }), { maxLength: 12 }),
        (spellings, cuts) => {
          const text = SECRET.split('')
            .map((c, i) => {
              const hex = c.charCodeAt(0).toString(16).padStart(2, '0');
              if (spellings[i] === 'percent') return `%${hex}`;
              if (spellings[i] === 'byte') return `\\x${hex}`;
              if (spellings[i] === 'twice') return `%25${hex}`;
              return spellings[i] === 'unicode' ? `\\u00${hex}` : c;
            })
            .join('');
          const points = [0, ...cuts.filter((c) => c < text.length).sort((a, b) => a - b), text.length];
          const redactor = new EventRedactor(() => forms);
          const out = points
            .slice(1)
            .map((end, i) => redactor.event({ data: text.slice(points[i], end) }).data)
            .join('');
          noWindowOfSecret(unescaped(unescaped(out)));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('ids: an id ending in the first characters of a secret has them withheld', () => {
    const redactor = new EventRedactor(() => forms);
    const first = redactor.event({ data: 'one', id: SECRET.slice(0, -1) });
    const second = redactor.event({ data: 'two', id: SECRET.slice(-1) });
    noWindowOfSecret(`${first.id ?? ''}${second.id ?? ''}`);
    expect([first.data, second.data]).toEqual(['one', 'two']);
  });

  it('an id then the data after it: joined in wire order', () => {
    const redactor = new EventRedactor(() => forms);
    const event = redactor.event({ id: SECRET.slice(0, 12), data: SECRET.slice(12) });
    noWindowOfSecret(`${event.id ?? ''}${event.data}`);
  });

  it('an escape cut at the end of an event does not hide the first characters before it', () => {
    const redactor = new EventRedactor(() => forms);
    // `sk-live` then `%2` (the `-` to come): the prefix is withheld although the text ends in `%2`.
    const first = redactor.event({ data: `${SECRET.slice(0, 7)}%2` }).data;
    const second = redactor.event({ data: `D${SECRET.slice(8)}` }).data;
    noWindowOfSecret(unescaped(`${first}${second}`));
  });

  it('ordinary JSON events with keys, numbers and ids pass unchanged', () => {
    const redactor = new EventRedactor(() => forms);
    for (let i = 0; i < 200; i++) {
      const e = {
        id: `evt-${i}`,
        data: JSON.stringify({ index: i, ok: true, delta: `word ${i}`, usage: null }),
      };
      expect(redactor.event(e)).toEqual(e);
    }
  });
});
