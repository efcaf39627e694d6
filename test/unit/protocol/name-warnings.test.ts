/**
 * §8.10 display-text safety on the approval pages: names that mix scripts or borrow a brand are
 * flagged (src/protocol/name-warnings.ts), agent text is made plain and capped before it is
 * escaped (src/protocol/display-text.ts), and unusually broad requests are called out
 * (src/protocol/request-warnings.ts). Each disguise below is one an agent could use to look like
 * someone the approver trusts; the quiet cases are names that must not cry wolf.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { plainText } from '../../../src/protocol/display-text.js';
import {
  brandMatches,
  mixedScriptWords,
  scriptsOf,
  WELL_KNOWN_BRANDS,
} from '../../../src/protocol/name-warnings.js';
import { broadRequest, nameWarnings } from '../../../src/protocol/request-warnings.js';

describe('mixed scripts in one word (§8.10 homoglyphs)', () => {
  const FLAGGED: readonly (readonly [string, string, string[]])[] = [
    ['a Cyrillic а inside a Latin word', 'Pаypal helper', ['Latin', 'Cyrillic']],
    ['a Greek ο inside a Latin word', 'Gοogle Drive', ['Latin', 'Greek']],
    ['a Cyrillic о in a Latin word', 'Microsоft Update', ['Latin', 'Cyrillic']],
    ['Greek, Cyrillic and Latin together', 'Αрple', ['Greek', 'Cyrillic', 'Latin']],
    ['an Armenian օ inside a Latin word', 'Gօogle', ['Latin', 'Armenian']],
    ['a Cherokee Ꮪ in a Latin word', 'Ꮪlack bot', ['Cherokee', 'Latin']],
    ['hidden by a zero-width joiner between the scripts', 'Pa\u200dураl', ['Latin', 'Cyrillic']],
  ];
  for (const [why, name, scripts] of FLAGGED) {
    it(`flags ${why}: ${JSON.stringify(name)}`, () => {
      const mixed = mixedScriptWords(name);
      expect(mixed).toHaveLength(1);
      expect([...(mixed[0]?.scripts ?? [])].sort()).toEqual([...scripts].sort());
    });
  }

  const QUIET: readonly (readonly [string, string])[] = [
    ['plain Latin', 'Shelter helper 2'],
    ['all Cyrillic', 'Помощник приюта'],
    ['all Greek', 'Βοηθός'],
    ['Japanese: Han with Katakana and Latin (UTS #39 allows it)', '東京タワーbot'],
    ['Korean with Han and Latin', '서울Cloud漢'],
    ['Latin and Cyrillic in separate words', 'Shelter помощник'],
    ['fullwidth Latin (NFKC makes it plain Latin)', 'Ｈｅｌｐｅｒ'],
    ['accents and combining marks', 'Café Zoë naïve e\u0301'],
  ];
  for (const [why, name] of QUIET) {
    it(`does not flag ${why}: ${JSON.stringify(name)}`, () => {
      expect(mixedScriptWords(name)).toEqual([]);
    });
  }

  it('property: a Latin word with any one Cyrillic or Greek letter in it is flagged', () => {
    const latin = fc.stringMatching(/^[a-z]{1,12}$/);
    const foreign = fc.constantFrom(...Array.from('аеорсухіјԁһАВЕКМНОРСТХαοριυνΑΒΕΚΜΝΟΡΤΧ'));
    fc.assert(
      fc.property(latin, foreign, fc.nat(), (word, letter, at) => {
        const i = at % (word.length + 1);
        const disguised = `${word.slice(0, i)}${letter}${word.slice(i)}`;
        expect(mixedScriptWords(`Agent ${disguised}`)).toHaveLength(1);
      }),
    );
  });

  it('property: names of ASCII letters, digits and punctuation never mix scripts', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[\x20-\x7e]{0,60}$/), (name) => {
        expect(mixedScriptWords(name)).toEqual([]);
      }),
    );
  });

  it('scriptsOf ignores digits and marks (Common, Inherited)', () => {
    expect(scriptsOf('agent7\u0301')).toEqual(['Latin']);
  });
});

describe('brand lookalikes (§8.10: "Apple Security Update")', () => {
  const BRANDS = ['Petstore', ...WELL_KNOWN_BRANDS];
  const MENTIONS: readonly (readonly [string, string])[] = [
    ['Apple Security Update', 'Apple'],
    ['PayPal-Support', 'PayPal'],
    ['Pay Pal helper', 'PayPal'],
    ['GitHubCopilotHelper', 'GitHub'],
    ['git-hub sync', 'GitHub'],
    ['ＧＯＯＧＬＥ', 'Google'],
    ['appleid verification', 'Apple'],
    ['Petstore admin console', 'Petstore'],
    // Case folding already turns the dotless ı into i (src/lookalike.ts), so this reads as Stripe.
    ['Strıpe payouts', 'Stripe'],
  ];
  for (const [name, brand] of MENTIONS) {
    it(`${JSON.stringify(name)} mentions ${brand}`, () => {
      expect(brandMatches(name, BRANDS)).toContainEqual({ brand, how: 'mention' });
    });
  }

  const DISGUISES: readonly (readonly [string, string, string])[] = [
    ['Cyrillic А for A', 'Аpple Security', 'Apple'],
    ['Greek ο for o', 'Gοοgle Drive', 'Google'],
    ['digit 1 for l', 'PayPa1 billing', 'PayPal'],
    ['digit 0 for o', 'Micr0soft Teams', 'Microsoft'],
    ['rn for m', 'rnicrosoft', 'Microsoft'],
    ['one letter too many', 'Gooogle', 'Google'],
    ['two letters swapped', 'Micorsoft', 'Microsoft'],
    ['one letter dropped', 'Anthropc agent', 'Anthropic'],
    ['Cherokee letters', 'ᏚᏞack', 'Slack'],
    ['Greek ο twice', 'Drοpbοx sync', 'Dropbox'],
    ['the service’s own name with a Cyrillic е', 'Pеtstore admin', 'Petstore'],
  ];
  for (const [why, name, brand] of DISGUISES) {
    it(`${JSON.stringify(name)} resembles ${brand} (${why})`, () => {
      const found = brandMatches(name, BRANDS);
      expect(found).toContainEqual({ brand, how: 'resembles' });
    });
  }

  const QUIET = [
    'Shelter helper',
    'Pet sync bot',
    'pineapple tracker',
    'metadata sync',
    'Visual diff',
    'Inventory counter',
    'Alice laptop',
    'Grace’s assistant',
  ];
  for (const name of QUIET) {
    it(`${JSON.stringify(name)} resembles no brand`, () => {
      expect(brandMatches(name, BRANDS)).toEqual([]);
    });
  }

  it('property: any well-known brand with Latin letters swapped for Cyrillic/Greek lookalikes is caught', () => {
    const LOOKALIKE: Readonly<Record<string, string>> = {
      a: 'а',
      c: 'с',
      e: 'е',
      i: 'і',
      o: 'ο',
      p: 'р',
      s: 'ѕ',
      x: 'х',
      y: 'у',
      A: 'Α',
      B: 'В',
      E: 'Е',
      H: 'Н',
      K: 'К',
      M: 'М',
      O: 'О',
      P: 'Р',
      T: 'Т',
      X: 'Х',
      S: 'Ѕ',
      I: 'І',
    };
    fc.assert(
      fc.property(
        fc.constantFrom(...WELL_KNOWN_BRANDS),
        fc.array(fc.boolean(), { maxLength: 12 }),
        (brand, swaps) => {
          const disguised = Array.from(brand, (c, i) => (swaps[i] ? (LOOKALIKE[c] ?? c) : c)).join('');
          expect(brandMatches(`${disguised} Security Update`, BRANDS).map((m) => m.brand)).toContain(brand);
        },
      ),
    );
  });
});

describe('display text (§8.10: strip HTML, limit length)', () => {
  it('strips tags, comments and tags rebuilt from their own pieces', () => {
    expect(plainText('<img src=x onerror="alert(1)">Helper', 80)).toMatchObject({
      text: 'Helper',
      markup: true,
    });
    expect(plainText('<<b>script>alert(1)<</b>/script> & co', 80).text).toBe('alert(1) & co');
    expect(plainText('Keep <!-- hidden --> it', 80).text).toBe('Keep it');
    expect(plainText('a < b and b > c', 80)).toMatchObject({ text: 'a < b and b > c', markup: false });
  });

  it('removes bidi overrides, zero-width and control characters, and says so', () => {
    const out = plainText('Invoice\u202egpj.exe\u200b\u0007', 80);
    expect(out).toMatchObject({ text: 'Invoicegpj.exe', hidden: true });
    expect(plainText('line one\nline\ttwo', 80)).toMatchObject({ text: 'line one line two', hidden: false });
  });

  it('caps length in characters without splitting a surrogate pair', () => {
    const out = plainText('😀'.repeat(10), 5);
    expect(out).toMatchObject({ text: '😀😀😀😀…', truncated: true });
  });

  it('a bidi override inside a tag cannot rebuild it once removed ("<\u202Ea>" → no tag)', () => {
    expect(plainText('<\u202Ea>x', 80)).toMatchObject({ text: 'x', hidden: true, markup: true });
  });

  it('property: the output never holds a tag, a control, format or bidi character, nor exceeds the cap', () => {
    const pieces = fc.constantFrom(
      '<',
      '>',
      '/',
      'a',
      'b',
      'script',
      '!',
      '--',
      ' ',
      '\u202e',
      '\u200b',
      '\n',
      '\u0000',
      'é',
      '😀',
      '"',
      '=',
    );
    fc.assert(
      fc.property(fc.array(pieces, { maxLength: 80 }), fc.integer({ min: 1, max: 40 }), (parts, max) => {
        const { text } = plainText(parts.join(''), max);
        expect(text).not.toMatch(/<(?:[!?][^<>]*|\/?[A-Za-z][^<>]*)>/);
        expect(text).not.toMatch(/[\p{Cc}\p{Cf}]/u);
        expect(Array.from(text).length).toBeLessThanOrEqual(max);
      }),
    );
  });

  it('name warnings say what was removed and what it looked like', () => {
    const kinds = nameWarnings('agent name', '<b>Аpple</b>\u200b Support', 'petstore').map((w) => w.kind);
    expect(kinds).toEqual(['markup', 'hidden', 'mixed_script', 'brand']);
    expect(nameWarnings('agent name', 'Shelter helper', 'petstore')).toEqual([]);
  });

  it("the operator's own names (approval.warn_names) warn like the built-in brands, each name once", () => {
    const names = ['Acme Bank', 'GitHub'];
    const mention = nameWarnings('agent name', 'AcmeBank payments helper', 'petstore', names);
    expect(mention).toEqual([
      {
        kind: 'brand',
        text: 'The agent name uses the name “Acme Bank”. Anyone can choose that name: this server has not verified that the agent comes from Acme Bank.',
      },
    ]);
    const disguised = nameWarnings('host name', 'Acrne-Bank laptop', 'petstore', names);
    expect(disguised.map((w) => w.text)).toEqual([
      'The host name looks like the name “Acme Bank” but is spelled differently. This is how impostors disguise themselves.',
    ]);
    // Listed by the operator and built in: one warning.
    expect(nameWarnings('agent name', 'GitHub helper', 'petstore', names)).toHaveLength(1);
    expect(nameWarnings('agent name', 'AcmeBank payments helper', 'petstore')).toEqual([]);
  });
});

describe('unusually broad requests (§8.10)', () => {
  const SERVICE = [
    { name: 'list_pets', method: 'GET' },
    { name: 'get_pet', method: 'GET' },
    { name: 'get_inventory', method: 'GET' },
    { name: 'create_pet', method: 'POST' },
    { name: 'delete_pet', method: 'DELETE' },
    { name: 'place_order', method: 'POST' },
  ];
  const pick = (...names: string[]) => SERVICE.filter((c) => names.includes(c.name));

  it('flags every data-changing capability of the service requested together', () => {
    expect(broadRequest(pick('create_pet', 'delete_pet', 'place_order'), SERVICE)?.text).toContain(
      'every capability that can change data (3)',
    );
  });

  it('flags three quarters of the service or more', () => {
    const w = broadRequest(
      pick('list_pets', 'get_pet', 'get_inventory', 'create_pet', 'delete_pet'),
      SERVICE,
    );
    expect(w?.text).toContain('5 of the 6 capabilities');
  });

  it('flags more than 10 capabilities whatever the service', () => {
    const many = Array.from({ length: 11 }, (_, i) => ({ name: `read_${i}`, method: 'GET' }));
    const big = [...many, ...Array.from({ length: 40 }, (_, i) => ({ name: `other_${i}`, method: 'GET' }))];
    expect(broadRequest(many, big)?.text).toContain('11 capabilities (more than 10)');
  });

  it('stays quiet for a focused request', () => {
    expect(broadRequest(pick('list_pets', 'create_pet'), SERVICE)).toBeUndefined();
    expect(broadRequest(pick('list_pets', 'get_pet', 'get_inventory'), SERVICE)).toBeUndefined();
  });
});
