/**
 * OpenAPI (Path Templating Matching): concrete paths are matched before templated ones, and the
 * servers behind an API route that way. A templated operation (`GET /reports/{reportId}`) can
 * therefore be made to build the path of a sibling (`GET /reports/payroll`) by a value of its
 * parameter, and the upstream runs the sibling: one the policy keeps apart (blocked, per-call,
 * high-risk, its own limits) would be reached through the grant of another. The siblings that
 * could do so are found once per capability, at its first call; a call whose path one of them
 * matches at least as specifically as its own operation is refused. Most operations have none,
 * and then pay one lookup.
 *
 * Matched as routers read paths, not only as OpenAPI does:
 * - literal text in any case: Express, Koa and ASP.NET route case-insensitively by default, so
 *   `reportId: "PAYROLL"` reaches `GET /reports/payroll` there;
 * - a sibling whose last segment is literal also takes that segment followed by `.` and a format
 *   (`payroll.json`): Rails appends `(.:format)` to every route and Spring MVC's suffix pattern
 *   matching (on by default before 5.3) reads `/payroll.*`. Only a value that begins with a
 *   sibling's own last segment and a dot is refused, so ordinary ids (`q3.json`, `2024.03`) pass.
 */
import { ProtocolError } from '../errors.js';
import type { Capability } from '../openapi/types.js';
import { decodedOrAsIs, matchTemplate } from './path-template.js';

export class PathShadows {
  /** Operations by API, method and number of segments: only these can take each other's paths. */
  readonly #byRoute = new Map<string, Capability[]>();
  /** Per capability, the siblings whose template may match a path it builds, and win; found on first use. */
  readonly #rivals = new WeakMap<Capability, readonly Rival[]>();

  constructor(capabilities: readonly Capability[]) {
    // Grouped by the path's text alone: templates are compiled only for capabilities called.
    for (const c of capabilities) {
      const route = routeOf(c);
      const group = this.#byRoute.get(route);
      if (group) group.push(c);
      else this.#byRoute.set(route, [c]);
    }
  }

  /**
   * Throws when the path `capability`'s call builds (`path`: under the base path, with its query)
   * is another operation's by the matching rule: as specific as its own template or more (a tie
   * leaves the upstream to choose).
   */
  refuseShadowed(capability: Capability, path: string): void {
    const rivals = this.#rivalsOf(capability);
    if (rivals.length === 0) return;
    const segments = decodedSegments(path);
    if (segments === undefined) return;
    const rival = rivals.find((d) => takes(d, segments))?.capability;
    if (rival === undefined) return;
    const { method, path: template } = rival.operation;
    throw new ProtocolError(
      'capability_not_granted',
      `These arguments make ${capability.name} a call of ${method.toUpperCase()} ${template}, another operation that the API matches first; its own capability must be used, with its own grant.`,
    );
  }

  #rivalsOf(capability: Capability): readonly Rival[] {
    let rivals = this.#rivals.get(capability);
    if (rivals === undefined) {
      const group = this.#byRoute.get(routeOf(capability)) ?? [];
      rivals = group
        .filter((d) => d !== capability && mayShadow(d, capability))
        .map((d) => ({ capability: d, formatted: formattedLiteral(d) }));
      this.#rivals.set(capability, rivals);
    }
    return rivals;
  }
}

interface Rival {
  readonly capability: Capability;
  /** Its last segment in lower case plus `.`, when that segment is literal text. */
  readonly formatted?: string;
}

/** Whether a router would send a path of these decoded `segments` to `rival`. */
function takes(rival: Rival, segments: readonly string[]): boolean {
  if (matchTemplate(rival.capability, segments, true) !== undefined) return true;
  const { formatted } = rival;
  const last = segments.at(-1);
  if (formatted === undefined || last === undefined || last.length <= formatted.length) return false;
  if (!last.toLowerCase().startsWith(formatted)) return false;
  // The segment without its format: the rival's literal text, so only the rest has to match.
  const bare = [...segments.slice(0, -1), formatted.slice(0, -1)];
  return matchTemplate(rival.capability, bare, true) !== undefined;
}

function formattedLiteral(c: Capability): string | undefined {
  const last = segmentsOf(c).at(-1) ?? '';
  if (last === '' || last.includes('{')) return undefined;
  return `${decodedOrAsIs(last).toLowerCase()}.`;
}

function routeOf(c: Capability): string {
  const { apiId, method } = c.operation;
  return `${apiId}\n${method}\n${segmentsOf(c).length}`;
}

/**
 * Whether `d` could take a path `c` builds: no literal segment of one differs from the other's
 * at the same place, and `d` has at least as many literal characters (OpenAPI's "more concrete").
 * Read from the templates' text, so that looking costs no compiled pattern. Two literal segments
 * are compared as written: only a value the agent chose is read in any case (takes), so that two
 * operations whose paths differ in case alone (`/Reports/{id}`, `/reports/{id}`) stay callable.
 */
function mayShadow(d: Capability, c: Capability): boolean {
  const ds = segmentsOf(d);
  const cs = segmentsOf(c);
  if (literalChars(ds) < literalChars(cs)) return false;
  return ds.every((segment, i) => {
    const other = cs[i] as string;
    return segment.includes('{') || other.includes('{') || segment === other;
  });
}

function segmentsOf(c: Capability): string[] {
  const { path } = c.operation;
  return (path.startsWith('/') ? path : '/' + path).split('/');
}

/** The template's characters outside `{…}`: path-template.ts's literalChars, without decoding. */
function literalChars(segments: readonly string[]): number {
  return segments.reduce((sum, s) => sum + s.replace(/\{[^{}]*\}/g, '').length, 0);
}

function decodedSegments(path: string): string[] | undefined {
  const end = path.search(/[?#]/);
  try {
    return (end === -1 ? path : path.slice(0, end)).split('/').map((s) => decodeURIComponent(s));
  } catch {
    return undefined;
  }
}
