/**
 * One segment of an OpenAPI path template (`pets`, `{petId}`, `{name}.json`, `{a}-{b}`) as a
 * pattern over a request path's decoded segment, with the parameters it captures in order.
 * Several parameters in one segment make the pattern ambiguous (`(.+)-(.+)-(.+)`), which
 * ECMAScript's backtracking engine matches in polynomial time; it runs on RE2, in linear time.
 */
import type { Capability } from '../openapi/types.js';
import { linearRegExp } from '../util/linear-regexp.js';

export interface TemplateSegment {
  /** Anchored at both ends; `.` matches any character, since the segment is already decoded. */
  readonly pattern: RegExp;
  /** The parameters, in the order of the pattern's groups. */
  readonly names: readonly string[];
  /** How many characters of the segment are literal text (more is more specific). */
  readonly literalChars: number;
}

/** `caseless`: literal text matched regardless of case, as Express, Koa and ASP.NET route. */
export function templateSegment(raw: string, caseless = false): TemplateSegment {
  const names: string[] = [];
  let literalChars = 0;
  const source = raw
    .split(/(\{[^{}]*\})/)
    .map((piece, i) => {
      if (i % 2 === 1) {
        names.push(piece.slice(1, -1));
        return '(.+)';
      }
      const text = decodedOrAsIs(piece);
      literalChars += text.length;
      return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    })
    .join('');
  return { pattern: linearRegExp(`^${source}$`, caseless ? 'si' : 's'), names, literalChars };
}

/** `text` percent-decoded, or as it is when it does not decode. */
export function decodedOrAsIs(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

export interface TemplateMatch {
  readonly capability: Capability;
  /** The path parameters' values, by name, in the template's order. */
  readonly values: readonly (readonly [string, string])[];
  /** Literal characters of the template: the more, the more specific. */
  readonly literals: number;
}

interface CompiledTemplate {
  readonly segments: readonly TemplateSegment[];
  readonly literals: number;
}

const compiled = new WeakMap<Capability, CompiledTemplate>();
const compiledCaseless = new WeakMap<Capability, CompiledTemplate>();

/** The capability's path template as segment patterns, compiled once per capability. */
function compiledTemplate(capability: Capability, caseless: boolean): CompiledTemplate {
  const cache = caseless ? compiledCaseless : compiled;
  let template = cache.get(capability);
  if (!template) {
    const path = capability.operation.path;
    const segments = (path.startsWith('/') ? path : '/' + path)
      .split('/')
      .map((raw) => templateSegment(raw, caseless));
    template = { segments, literals: segments.reduce((sum, segment) => sum + segment.literalChars, 0) };
    cache.set(capability, template);
  }
  return template;
}

/**
 * Whether the capability's template matches a path's decoded `segments`, and with what values.
 * `caseless`: its literal text in any case (path-shadows.ts: routers that ignore case).
 */
export function matchTemplate(
  capability: Capability,
  segments: readonly string[],
  caseless = false,
): TemplateMatch | undefined {
  const template = compiledTemplate(capability, caseless);
  if (template.segments.length !== segments.length) return undefined;
  const values: [string, string][] = [];
  for (let i = 0; i < segments.length; i++) {
    const { pattern, names } = template.segments[i] as TemplateSegment;
    const m = pattern.exec(segments[i] as string);
    if (!m) return undefined;
    names.forEach((name, j) => values.push([name, m[j + 1] as string]));
  }
  return { capability, values, literals: template.literals };
}
