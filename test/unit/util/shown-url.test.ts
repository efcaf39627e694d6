import { describe, expect, it } from 'vitest';
import { maskUrlsIn, shownUrl } from '../../../src/util/shown-url.js';

describe('shownUrl: a URL as messages and logs may show it', () => {
  it('masks query values and user info, keeps parameter names, drops the fragment', () => {
    expect(shownUrl('https://git.example/api/raw?ref=main&private_token=glpat-XYZ#top')).toBe(
      'https://git.example/api/raw?ref=…&private_token=…',
    );
    expect(shownUrl('https://user:pw@host.example/spec.yaml')).toBe('https://…@host.example/spec.yaml');
    expect(shownUrl('https://host.example/spec.yaml?SECRETONLY')).toBe('https://host.example/spec.yaml?…');
  });

  it('leaves a URL with nothing to mask as written', () => {
    expect(shownUrl('ftp://files.example.com')).toBe('ftp://files.example.com');
    expect(shownUrl('./specs/petstore.yaml')).toBe('./specs/petstore.yaml');
  });

  it('masks every URL in a message it did not build', () => {
    expect(
      maskUrlsIn('a.yaml: $ref https://x.example/b.yaml?token=T1 (from https://u:p@y.example/) failed'),
    ).toBe('a.yaml: $ref https://x.example/b.yaml?token=… (from https://…@y.example/) failed');
  });
});
