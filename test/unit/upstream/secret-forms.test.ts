import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { replaceRanges, secretForms, secretRanges } from '../../../src/upstream/secret-forms.js';

const SECRET = 'tok/en+Sécret=42"q\\';
const forms = [secretForms(SECRET)];
const redact = (text: string): string => replaceRanges(text, secretRanges(text, forms), '[R]');

describe('secretForms and secretRanges (issue 10, class 12)', () => {
  it('literal forms: as sent, percent, form, JSON-escaped, base64 at three alignments, hex', () => {
    const f = secretForms('abcdefgh');
    expect(f.literal).toContain('abcdefgh');
    expect(f.literal).toContain(Buffer.from('abcdefgh').toString('hex'));
    expect(f.literal).toContain(Buffer.from('abcdefgh').toString('hex').toUpperCase());
    // Each core is what base64 of any blob holding the secret at that alignment contains.
    for (const prefix of ['', 'x', 'xy']) {
      const blob = Buffer.from(`${prefix}abcdefgh!`).toString('base64');
      expect(
        f.literal.some((core) => blob.includes(core)),
        prefix,
      ).toBe(true);
    }
  });

  describe('a secret with `/`, `+`, a space and `!`', () => {
    const secret = '~a/b+c d!e?f>g/h';
    const own = [secretForms(secret)];
    const find = (text: string): string => replaceRanges(text, secretRanges(text, own), '[R]');

    // PHP's json_encode writes `/` as `\/`. With no %XX or \uXXXX in the text, nothing is decoded:
    // only a literal form finds it.
    it('is found JSON-escaped with `\\/`', () => {
      expect(find(`{"k":"${secret.replaceAll('/', '\\/')}"}`)).toBe('{"k":"[R]"}');
    });

    // One byte into the blob its base64 holds a `/`, which base64url writes `_`.
    it('is found base64url-encoded inside a longer blob', () => {
      const blob = Buffer.from(`x${secret}`).toString('base64url');
      expect(blob).toMatch(/[-_]/);
      expect(find(blob)).toBe('eH[R]g');
    });

    // encodeURIComponent leaves `!` as it is, where a form encoder writes %21. Text with %XX is
    // also searched decoded, but a binary body only for the literal forms (Redactor.inBytes).
    it('has its encodeURIComponent spelling among the literal forms', () => {
      expect(own[0]?.literal).toContain(encodeURIComponent(secret));
      expect(encodeURIComponent(secret)).not.toBe(new URLSearchParams({ s: secret }).toString().slice(2));
    });
  });

  it('finds the secret behind any mix of %XX, \\uXXXX, \\xXX and JSON escapes', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom('raw', 'pct', 'PCT', 'u', 'U', 'x', 'json'), {
          minLength: Array.from(SECRET).length,
          maxLength: Array.from(SECRET).length,
        }),
        fc.string(),
        fc.string(),
        (how, before, after) => {
          // A lone backslash next to the secret would itself be an escape of its first character.
          fc.pre(!before.endsWith('\\'));
          const encoded = Array.from(SECRET)
            .map((c, i) => {
              const bytes = [...Buffer.from(c)];
              const mode = how[i];
              if (mode === 'pct' || mode === 'PCT') {
                return bytes
                  .map((b) => '%' + b.toString(16).padStart(2, '0'))
                  .map((t) => (mode === 'PCT' ? t.toUpperCase() : t))
                  .join('');
              }
              if (mode === 'u' || mode === 'U') {
                const hex = c.charCodeAt(0).toString(16).padStart(4, '0');
                return `\\u${mode === 'U' ? hex.toUpperCase() : hex}`;
              }
              if (mode === 'x' && bytes.length === 1)
                return `\\x${(bytes[0] as number).toString(16).padStart(2, '0')}`;
              // A raw backslash would itself start an escape: it is always written escaped.
              if (mode === 'json' || c === '\\') return JSON.stringify(c).slice(1, -1);
              return c;
            })
            .join('');
          const out = redact(before + encoded + after);
          expect(out).toContain('[R]');
          expect(out).not.toContain(encoded);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('an escape inside an escape (JSON in a JSON string, percent-encoded JSON) is decoded twice', () => {
    const nested = JSON.stringify(JSON.stringify({ k: SECRET }));
    expect(redact(nested)).not.toContain('Sécret');
    const pctJson = encodeURIComponent(JSON.stringify({ k: SECRET }));
    expect(redact(pctJson)).toBe(encodeURIComponent('{"k":"') + '[R]' + encodeURIComponent('"}'));
  });

  it('redaction replaces whole escapes: the text around stays intact', () => {
    const lower = encodeURIComponent(SECRET).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase());
    const text = `a%41 ${lower} z\\n`;
    expect(redact(text)).toBe('a%41 [R] z\\n');
  });

  it('text without the secret is returned unchanged', () => {
    fc.assert(
      fc.property(fc.string(), (text) => {
        fc.pre(!text.includes('tok'));
        expect(redact(text)).toBe(text);
      }),
    );
  });

  it('replaceRanges merges overlapping and touching ranges', () => {
    expect(
      replaceRanges(
        '0123456789',
        [
          [2, 4],
          [3, 6],
          [6, 7],
          [8, 9],
        ],
        '#',
      ),
    ).toBe('01#7#9');
  });
});
