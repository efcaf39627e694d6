/** Liveness (`/healthz`: the process answers) and readiness (`/readyz`: it can serve traffic). */
import { ProtocolError } from '../../errors.js';
import { sendJson } from '../respond.js';
import { step } from '../pipeline.js';
import type { Router } from '../router.js';

export function healthRoutes(router: Router, readiness: { ready(): boolean; capabilities: number }): void {
  router.add('GET', '/healthz', [step('alive', ({ res }) => sendJson(res, 200, { status: 'ok' }))]);
  router.add('GET', '/readyz', [
    step('ready', ({ res }) => {
      if (!readiness.ready()) throw new ProtocolError('not_ready', 'The proxy is starting or shutting down.');
      sendJson(res, 200, { status: 'ready', capabilities: readiness.capabilities });
    }),
  ]);
}
