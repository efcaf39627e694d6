/**
 * Metrics read from each request's decision record (src/http/pipeline.ts), in the one place every
 * request ends: the route's pattern (never the raw path, which carries ids), the status, and for
 * executions and registrations their outcome, and JWTs refused for a wrong clock (§8.2). The record's `capability` is set only for names in
 * the catalog, and `code` is a closed set, so no label value comes from the client.
 */
import type { Metrics } from '../metrics.js';
import type { DecisionRecord } from './pipeline.js';
import { clockRefusalOf } from '../protocol/jwt.js';
import { PENDING_APPROVAL } from '../protocol/per-call.js';

const EXECUTE = 'POST /capability/execute';
const REGISTER = 'POST /agent/register';

export function recordRequestMetrics(metrics: Metrics): (decision: DecisionRecord) => void {
  // Route names are `METHOD /pattern`; cached, so the per-request cost is one Map lookup.
  const patterns = new Map<string, string>();
  const patternOf = (route: string): string => {
    let pattern = patterns.get(route);
    if (pattern === undefined) {
      const space = route.indexOf(' ');
      // No route matched (`-`): 404s and 405s of arbitrary paths share one series.
      pattern = space < 0 ? 'other' : route.slice(space + 1);
      patterns.set(route, pattern);
    }
    return pattern;
  };
  return (decision) => {
    metrics.request(patternOf(decision.route), decision.status ?? 0);
    if (decision.route === EXECUTE) {
      const pending = decision.code === null && decision.reason === PENDING_APPROVAL;
      metrics.execution(decision.capability, pending ? PENDING_APPROVAL : decision.code);
    } else if (decision.route === REGISTER) metrics.registration(decision.code);
    if (decision.code === 'invalid_jwt') {
      const claim = clockRefusalOf(decision.reason);
      if (claim !== undefined) metrics.clockRefusal(claim);
    }
  };
}
