import { describe, expect, it } from 'vitest';
import { safeReturn } from '../../../src/http/page-auth.js';

const ORIGIN = 'http://127.0.0.1:8080';

describe('safeReturn: where sign-in may send the browser back to', () => {
  it.each([
    ['//evil.example'],
    ['/\\evil.example'],
    ['\\\\evil.example'],
    ['https://evil.example'],
    ['/\t/evil.example'],
    ['/\n/evil.example'],
    [' //evil.example'],
    ['/./\\evil.example'],
    ['javascript:alert(1)'],
    ['/\u3000/evil.example'],
    ['/%2F%2Fevil.example'],
    ['/%5Cevil.example'],
    [`/${'a'.repeat(600)}`],
  ])('%j stays on the site', (value) => {
    const location = safeReturn(value);
    expect(new URL(location, ORIGIN).origin).toBe(ORIGIN);
  });

  it('keeps a local path with its query', () => {
    expect(safeReturn('/device?code=BCDF-GHJK')).toBe('/device?code=BCDF-GHJK');
  });

  it('percent-encodes what a Location header cannot hold (Node refuses it after the session is made)', () => {
    expect(safeReturn('/device?x=\u20ac')).toBe('/device?x=%E2%82%AC');
    expect(safeReturn('/a b/\u00e9')).toBe('/a%20b/%C3%A9');
    expect(safeReturn('/\u3000/evil.example')).toBe('/%E3%80%80/evil.example');
    for (const value of ['/device?x=\u20ac', '/\u{1F600}', '/caf\u00e9']) {
      expect(safeReturn(value)).toMatch(/^[\u0021-\u007e]+$/);
    }
  });

  it('refuses a lone surrogate', () => {
    expect(safeReturn('/x\ud800')).toBe('/device');
  });
});
