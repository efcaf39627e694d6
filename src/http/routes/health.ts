/** Liveness (`/healthz`: the process answers) and readiness (`/readyz`: it can serve traffic). */
import { ProtocolError } from '../../errors.js';
import { sendJson } from '../respond.js';
import type { Router } from '../router.js';

export function healthRoutes(router: Router, readiness: { ready(): boolean; capabilities: number }): void {
  router.add('GET', '/healthz', ({ res }) => {
    sendJson(res, 200, { status: 'ok' });
  });
  router.add('GET', '/readyz', ({ res }) => {
    if (!readiness.ready()) throw new ProtocolError('not_ready', 'The proxy is starting or shutting down.');
    sendJson(res, 200, { status: 'ready', capabilities: readiness.capabilities });
  });
}
