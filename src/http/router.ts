/**
 * A fixed route table: exact paths, with `:name` segments for ids. Distinguishes "no such path"
 * (404) from "path exists, method does not" (405 with `Allow`). Every route is a list of named
 * steps (src/http/pipeline.ts): there is no other way to add one.
 */
import { hasControlCharacter } from '../util/control-characters.js';
import { endpoint, type Handler, type Recorder, type SharedStep, type Step } from './pipeline.js';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

interface Route {
  readonly segments: readonly string[];
  readonly handlers: Map<string, Handler>;
}

export type Match =
  | { readonly kind: 'found'; readonly handler: Handler; readonly params: Record<string, string> }
  | { readonly kind: 'method_not_allowed'; readonly allow: readonly string[] }
  | { readonly kind: 'not_found' };

const NO_PARAMS: Record<string, string> = Object.freeze({});

export class Router {
  private readonly routes: Route[] = [];
  /** Routes without `:name` segments by their exact path: most requests (execute) match at once. */
  private readonly exact = new Map<string, Route>();

  /** A route whose steps keep no state of their own. */
  add(method: Method, path: string, steps: readonly SharedStep[]): this {
    return this.addWithState(method, path, steps, () => undefined);
  }

  /** A route whose steps share a per-request state, made fresh by `init` for each request. */
  addWithState<S>(
    method: Method,
    path: string,
    steps: readonly (Step<S> | SharedStep)[],
    init: () => S,
    record?: Recorder<S>,
  ): this {
    const segments = path.split('/').slice(1);
    let route = this.routes.find((r) => r.segments.join('/') === segments.join('/'));
    if (!route) {
      route = { segments, handlers: new Map() };
      this.routes.push(route);
      // Routes are tried in the order they were added: an earlier route with parameters that
      // takes this path keeps it, so such a path stays out of the exact table.
      const exact = !segments.some((s) => s.startsWith(':'));
      if (exact && !this.routes.some((r) => r !== route && matchSegments(r.segments, segments))) {
        this.exact.set(path, route);
      }
    }
    if (route.handlers.has(method)) throw new Error(`duplicate route ${method} ${path}`);
    route.handlers.set(method, endpoint(`${method} ${path}`, steps, init, record));
    return this;
  }

  match(method: string, pathname: string): Match {
    const exact = this.exact.get(pathname);
    if (exact !== undefined) return found(exact, method, NO_PARAMS);
    const parts = pathname.split('/').slice(1);
    for (const route of this.routes) {
      const params = matchSegments(route.segments, parts);
      if (params) return found(route, method, params);
    }
    return { kind: 'not_found' };
  }
}

function found(route: Route, method: string, params: Record<string, string>): Match {
  // HEAD is answered by the GET handler; Node omits the body of HEAD responses.
  const handler = route.handlers.get(method) ?? (method === 'HEAD' ? route.handlers.get('GET') : undefined);
  if (handler) return { kind: 'found', handler, params };
  const allow = [...route.handlers.keys()];
  if (allow.includes('GET')) allow.push('HEAD');
  return { kind: 'method_not_allowed', allow };
}

function matchSegments(
  pattern: readonly string[],
  parts: readonly string[],
): Record<string, string> | undefined {
  if (pattern.length !== parts.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i] as string;
    const actual = parts[i] as string;
    if (p.startsWith(':')) {
      if (actual === '') return undefined;
      let value: string;
      try {
        value = decodeURIComponent(actual);
      } catch {
        return undefined;
      }
      // No id or name in a route holds a control character; one would only reach a lookup that
      // PostgreSQL refuses (a NUL) instead of finding nothing.
      if (hasControlCharacter(value)) return undefined;
      params[p.slice(1)] = value;
    } else if (p !== actual) {
      return undefined;
    }
  }
  return params;
}
