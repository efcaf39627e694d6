/**
 * An API's secrets, kept out of everything an upstream answer hands to the agent: the static
 * credentials and secret headers of its configuration, and the OAuth tokens the proxy currently
 * holds. Text is rewritten (`[redacted]`); bytes are only checked, since rewriting them would
 * corrupt them (the caller withholds a binary answer that holds a secret).
 */
import { MIN_SERVICE_SECRET_LENGTH, type ApiExecutionSettings } from '../config/api-execution.js';
import { replaceRanges, secretForms, secretRanges, type SecretForms } from './secret-forms.js';

export const REDACTED = '[redacted]';

export class Redactor {
  private readonly staticForms: readonly SecretForms[];
  /** Forms of each OAuth token, worked out once per token; dropped wholesale once stale ones pile up. */
  private readonly tokenForms = new Map<string, SecretForms>();

  constructor(
    secrets: readonly string[],
    private readonly tokens: () => readonly string[],
  ) {
    this.staticForms = secrets.map(secretForms);
  }

  /** Every secret's forms as of now (tokens come and go). */
  forms(): readonly SecretForms[] {
    const current = this.tokens();
    if (current.length === 0) return this.staticForms;
    const tokens = current.filter((t) => t.length >= MIN_SERVICE_SECRET_LENGTH);
    if (tokens.length === 0) return this.staticForms;
    if (this.tokenForms.size > tokens.length * 2) this.tokenForms.clear();
    const forms = tokens.map((token) => {
      let cached = this.tokenForms.get(token);
      if (!cached) {
        cached = secretForms(token);
        this.tokenForms.set(token, cached);
      }
      return cached;
    });
    return [...this.staticForms, ...forms];
  }

  text(text: string): string {
    return replaceRanges(text, secretRanges(text, this.forms()), REDACTED);
  }

  /**
   * Whether `shown`, text read from `bytes` and already through text(), still holds a secret for
   * whoever reads it another way: an upstream that declares one charset and sends another (ASCII
   * declared UTF-16 reads as CJK, UTF-16 without a charset reads with a NUL after each letter)
   * passes text(), and the agent gets the secret back by taking the text's UTF-16 units or its
   * UTF-8 bytes as bytes. Text read as UTF-8 from bytes without a NUL cannot hide one: every
   * secret is Latin-1 (it is sent in a header or a percent-encoded query), so its UTF-16 and
   * UTF-32 forms hold a NUL byte; the common case costs one search for a zero byte.
   */
  hiddenIn(shown: string, bytes: Buffer, readAsUtf8: boolean): boolean {
    if (readAsUtf8 && !bytes.includes(0)) return false;
    const units = Buffer.from(shown, 'utf16le');
    const views = [Buffer.from(shown, 'utf8'), units, Buffer.from(units).swap16()];
    return views.some((view) => this.inBytes(view));
  }

  /**
   * Text read from bytes that were cut at a cap, without the characters that could be the start
   * of a secret the cut went through: the whole secret is not there to be found, and its first
   * part would reach the agent. `width`: how many characters of the text one character of a
   * secret may take (more than one when wide text was read as UTF-8).
   */
  withoutCutEnd(text: string, width = 1): string {
    const longest = Math.max(0, ...this.forms().flatMap((f) => f.literal.map((form) => form.length)));
    return text.slice(0, Math.max(0, text.length - width * (longest - 1)));
  }

  /**
   * Whether bytes hold a secret in one of its literal forms (a binary body is not unescaped), as
   * UTF-8, UTF-16 or UTF-32 of either byte order: a dump of headers in a wide encoding is still
   * the secret once its NULs are dropped.
   */
  inBytes(bytes: Buffer): boolean {
    return this.forms().some((f) => encodedForms(f).some((form) => bytes.includes(form)));
  }
}

/**
 * The static secrets of an API as it sends them. Configuration refuses a credential or a secret
 * header (env, file, value) shorter than MIN_SERVICE_SECRET_LENGTH; a shorter static header can
 * only be an inline value such as `X-Tenant: acme`, which is configuration, not a secret, and is
 * left alone (redacting it would rewrite ordinary words in every answer).
 */
export function staticSecrets(settings: ApiExecutionSettings): string[] {
  const out: string[] = [];
  for (const value of Object.values(settings.headers)) {
    if (value.length >= MIN_SERVICE_SECRET_LENGTH) out.push(value, ...headerCredentials(value));
  }
  for (const c of Object.values(settings.credentials)) {
    // A single secret for an http basic scheme is sent base64-encoded: that form is a secret too.
    if (c.kind === 'secret') out.push(c.value, Buffer.from(c.value, 'utf8').toString('base64'));
    else if (c.kind === 'basic') out.push(...basicSecrets(c.username, c.password));
    else out.push(c.clientSecret);
  }
  return [...new Set(out)];
}

// `<scheme> <credential>` (RFC 9110 §11.4): a scheme word, then one token68 or auth-param list.
const SCHEME_AND_CREDENTIAL = /^[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*[ \t]+(\S+)$/;
const BASIC = /^basic[ \t]/i;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
// One auth-param (`token="abc…"`, `key=abc…`) of an auth-param list.
const AUTH_PARAM = /[A-Za-z0-9!#$%&'*+.^_`|~-]+="?([^",]*)"?/g;

/**
 * The credential inside a static header value sent as `<scheme> <credential>` (`Authorization:
 * Bearer sk-…`, `Token token="…"`, any header): an upstream that rejects it echoes the credential
 * alone (`token sk-… has expired`), which the whole value does not match. For `Basic`, what its
 * base64 stands for too, as for an http basic credential (basicSecrets). A value whose rest holds
 * spaces (`acme-sync (ops@acme.com)`) is a description, not a credential: nothing more is taken.
 */
function headerCredentials(value: string): string[] {
  const trimmed = value.trim();
  const credential = SCHEME_AND_CREDENTIAL.exec(trimmed)?.[1];
  if (credential === undefined) return [];
  const params = [...credential.matchAll(AUTH_PARAM)].map((m) => m[1] ?? '');
  const out = [credential, ...params].filter((s) => s.length >= MIN_SERVICE_SECRET_LENGTH);
  if (BASIC.test(trimmed) && BASE64.test(credential)) {
    const decoded = Buffer.from(credential, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon !== -1) out.push(...basicSecrets(decoded.slice(0, colon), decoded.slice(colon + 1)));
  }
  return out;
}

/**
 * An http basic credential's secrets, however it was configured: the password, `user:pass` and
 * its base64 (the header's credential). One shorter than MIN_SERVICE_SECRET_LENGTH (a password
 * only a static header can carry, which configuration checks as a whole) is left out, like a
 * short static header: it would rewrite ordinary words.
 */
function basicSecrets(username: string, password: string): string[] {
  const pair = `${username}:${password}`;
  const base64 = Buffer.from(pair, 'utf8').toString('base64');
  return [password, pair, base64].filter((s) => s.length >= MIN_SERVICE_SECRET_LENGTH);
}

const encoded = new WeakMap<SecretForms, readonly Buffer[]>();

/** A secret's literal forms as bytes in each encoding `inBytes` looks for; worked out once per forms. */
function encodedForms(forms: SecretForms): readonly Buffer[] {
  let out = encoded.get(forms);
  if (out === undefined) {
    out = forms.literal.flatMap((form) => {
      const utf16le = Buffer.from(form, 'utf16le');
      const utf32le = Buffer.alloc(utf16le.length * 2);
      // Each UTF-16 unit as one code point: exact for what a header can carry (Latin-1).
      for (let i = 0; i < form.length; i++) utf32le.writeUInt32LE(form.charCodeAt(i), i * 4);
      return [
        Buffer.from(form, 'utf8'),
        utf16le,
        Buffer.from(utf16le).swap16(),
        utf32le,
        Buffer.from(utf32le).swap32(),
      ];
    });
    encoded.set(forms, out);
  }
  return out;
}
