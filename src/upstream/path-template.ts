/**
 * One segment of an OpenAPI path template (`pets`, `{petId}`, `{name}.json`, `{a}-{b}`) as a
 * pattern over a request path's decoded segment, with the parameters it captures in order.
 * Several parameters in one segment make the pattern ambiguous (`(.+)-(.+)-(.+)`), which
 * ECMAScript's backtracking engine matches in polynomial time; it runs on RE2, in linear time.
 */
import { linearRegExp } from '../util/linear-regexp.js';

export interface TemplateSegment {
  /** Anchored at both ends; `.` matches any character, since the segment is already decoded. */
  readonly pattern: RegExp;
  /** The parameters, in the order of the pattern's groups. */
  readonly names: readonly string[];
  /** How many characters of the segment are literal text (more is more specific). */
  readonly literalChars: number;
}

export function templateSegment(raw: string): TemplateSegment {
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
  return { pattern: linearRegExp(`^${source}$`, 's'), names, literalChars };
}

function decodedOrAsIs(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
