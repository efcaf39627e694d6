/**
 * Route matching: exact paths come from a table (the execute path's lookup), and the order in
 * which routes were added still decides between a route with parameters and an exact one.
 */
import { describe, expect, it } from 'vitest';
import { step } from '../../../src/http/pipeline.js';
import { Router, type Match } from '../../../src/http/router.js';

const noop = [step('noop', () => undefined)];

/** Which route answered: the handler's identity is its route, so compare through a map. */
function routeOf(router: Router, handlers: Map<unknown, string>, method: string, path: string): string {
  const m: Match = router.match(method, path);
  if (m.kind === 'found') return `${handlers.get(m.handler)} ${JSON.stringify(m.params)}`;
  return m.kind === 'method_not_allowed' ? `405 ${m.allow.join(',')}` : '404';
}

function build(routes: [method: 'GET' | 'POST', path: string][]): (method: string, path: string) => string {
  const router = new Router();
  const handlers = new Map<unknown, string>();
  for (const [method, path] of routes) {
    router.add(method, path, noop);
    const m = router.match(method, path.replace(/:(\w+)/g, 'X'));
    // A route shadowed by an earlier one is never matched: it keeps no label.
    if (m.kind === 'found' && !handlers.has(m.handler)) handlers.set(m.handler, `${method} ${path}`);
  }
  return (method, path) => routeOf(router, handlers, method, path);
}

describe('Router', () => {
  it('matches exact paths, and parameters with their decoded values', () => {
    const match = build([
      ['POST', '/capability/execute'],
      ['GET', '/capability/status/:id'],
    ]);
    expect(match('POST', '/capability/execute')).toBe('POST /capability/execute {}');
    expect(match('GET', '/capability/status/job%5F1')).toBe('GET /capability/status/:id {"id":"job_1"}');
    expect(match('GET', '/capability/status/')).toBe('404');
    // No id holds a control character: such a parameter finds no route, never a lookup.
    expect(match('GET', '/capability/status/job%00x')).toBe('404');
    expect(match('GET', '/capability/status/job%0A')).toBe('404');
    expect(match('GET', '/capability/execute/more')).toBe('404');
  });

  it('answers 405 with Allow (HEAD with GET) on an exact path, and HEAD with the GET handler', () => {
    const match = build([
      ['GET', '/agent/status'],
      ['POST', '/capability/execute'],
    ]);
    expect(match('DELETE', '/agent/status')).toBe('405 GET,HEAD');
    expect(match('GET', '/capability/execute')).toBe('405 POST');
    expect(match('HEAD', '/agent/status')).toBe('GET /agent/status {}');
  });

  it('keeps the order routes were added in: an earlier route with parameters takes the path', () => {
    const match = build([
      ['GET', '/things/:id'],
      ['GET', '/things/new'],
      ['GET', '/other/new'],
      ['GET', '/other/:id'],
    ]);
    expect(match('GET', '/things/new')).toBe('GET /things/:id {"id":"new"}');
    expect(match('GET', '/other/new')).toBe('GET /other/new {}');
    expect(match('GET', '/other/7')).toBe('GET /other/:id {"id":"7"}');
  });
});
