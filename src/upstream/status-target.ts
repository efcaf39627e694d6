/**
 * Issue 10, class 4: a URL the upstream chose (a 202's status URL, a 303 to the result) is never
 * fetched as it is. It is read as a call of a GET operation of the same API — same origin, under
 * the base path, matched against the operation's path template — with the arguments the URL
 * carries: path values and declared query parameters, nothing else. The caller then checks that
 * the agent may make that call itself (grant, constraints) and sends it as built from those
 * arguments, exactly as an execution of that capability would be. Anything else — another path,
 * a dot segment, an encoded `/` or `\`, an undeclared query parameter — maps to nothing.
 */
import { propertySchema } from '../openapi/local-ref.js';
import { matchTemplate, type TemplateMatch } from './path-template.js';
import type { Capability, ParameterBinding } from '../openapi/types.js';
import { hasControlCharacter } from '../util/control-characters.js';

export interface StatusTarget {
  readonly capability: Capability;
  /** The arguments the URL carries for the capability (path values, declared query values). */
  readonly args: Readonly<Record<string, unknown>>;
  /** The URL resolved against the API (absolute, dot segments removed). */
  readonly url: string;
}

export interface ApiLocation {
  /** `https://host:port`; undefined when the API has no usable base URL. */
  readonly origin?: string;
  /** The base URL's path without a trailing slash. */
  readonly basePath: string;
}

// An upstream's URL is short; anything longer is refused before it is parsed, and so is a long
// segment.
const MAX_URL_LENGTH = 4096;
const MAX_SEGMENT_LENGTH = 256;

/**
 * What a path value may not contain once decoded: a separator a server might act on (`/`, `\`,
 * `;` path parameters as Tomcat reads them), a `%` (decoded once more by some servers), controls.
 */
// eslint-disable-next-line no-control-regex -- control characters are exactly what must not pass
const UNSAFE_PATH_VALUE = /[/\\;%\0-\x1f\x7f]/;

/**
 * `operations`: the capabilities the URL may name (GET operations of the API). `relativeTo`:
 * the path a relative URL is resolved against (the request that answered with it).
 */
export function statusTarget(
  api: ApiLocation,
  operations: readonly Capability[],
  location: string,
  relativeTo: string,
): StatusTarget | undefined {
  if (!api.origin || location.length > MAX_URL_LENGTH) return undefined;
  let url: URL;
  try {
    url = new URL(location, api.origin + relativeTo);
  } catch {
    return undefined;
  }
  if (url.origin !== api.origin || url.username !== '' || url.password !== '') return undefined;
  if (!url.pathname.startsWith(api.basePath + '/')) return undefined;
  const segments = decodedSegments(url.pathname.slice(api.basePath.length));
  if (!segments) return undefined;
  const match = bestMatch(operations, segments);
  if (!match) return undefined;
  const { capability } = match;
  const args: Record<string, unknown> = {};
  for (const [name, value] of match.values) {
    const p = binding(capability, 'path', name);
    if (!p || p.style !== 'simple' || p.contentType !== undefined || !safePathValue(value)) return undefined;
    args[p.argument] = typed(capability, p.argument, value);
  }
  for (const [name, value] of url.searchParams) {
    const p = binding(capability, 'query', name);
    if (!p || p.contentType !== undefined || Object.hasOwn(args, p.argument)) return undefined;
    if (hasControlCharacter(value)) return undefined;
    args[p.argument] = typed(capability, p.argument, value);
  }
  return { capability, args, url: url.href };
}

/** The path's segments, percent-decoded; undefined when one cannot be decoded. */
function decodedSegments(path: string): string[] | undefined {
  if (path.split('/').some((s) => s.length > MAX_SEGMENT_LENGTH)) return undefined;
  try {
    return path.split('/').map((s) => decodeURIComponent(s));
  } catch {
    return undefined;
  }
}

function safePathValue(value: string): boolean {
  return value !== '' && value !== '.' && value !== '..' && !UNSAFE_PATH_VALUE.test(value);
}

/**
 * The most specific template that matches (OpenAPI: concrete paths before templated ones). Two
 * equally specific matches are ambiguous, and ambiguity maps to nothing.
 */
function bestMatch(
  operations: readonly Capability[],
  segments: readonly string[],
): TemplateMatch | undefined {
  let best: TemplateMatch | undefined;
  let tie = false;
  for (const capability of operations) {
    const match = matchTemplate(capability, segments);
    if (!match) continue;
    if (!best || match.literals > best.literals) {
      best = match;
      tie = false;
    } else if (match.literals === best.literals) tie = true;
  }
  return tie ? undefined : best;
}

function binding(
  capability: Capability,
  location: 'path' | 'query',
  name: string,
): ParameterBinding | undefined {
  return capability.operation.parameters.find((p) => p.in === location && p.name === name);
}

/** A URL's text as the argument's schema type expects (ids are often integers). */
function typed(capability: Capability, argument: string, value: string): unknown {
  const type = propertySchema(capability.argumentsSchema, argument)?.type;
  const is = (t: string): boolean => type === t || (Array.isArray(type) && type.includes(t));
  if ((is('integer') || is('number')) && /^-?(?:0|[1-9]\d*)(?:\.\d+)?$/.test(value)) return Number(value);
  if (is('boolean') && (value === 'true' || value === 'false')) return value === 'true';
  return value;
}
