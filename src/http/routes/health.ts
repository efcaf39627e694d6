/**
 * Liveness (`/healthz`: the process answers) and readiness (`/readyz`: it can serve traffic).
 * Liveness stays 200 through a database outage, so an orchestrator does not restart a replica
 * that would only come back to the same outage; readiness says 503 while the database cannot be
 * reached (storage/readiness.ts) and 200 again by itself once it answers (issue 13).
 */
import { ProtocolError, STORE_RETRY_AFTER_S } from '../../errors.js';
import { sendJson } from '../respond.js';
import { step } from '../pipeline.js';
import type { Router } from '../router.js';

export interface Readiness {
  /** Started and not shutting down. */
  ready(): boolean;
  /** The database answers (a cached, bounded ping: never waits long, never rejects). */
  database(): Promise<boolean>;
  /** How many capabilities the catalog in force has (a reload may change it). */
  capabilities(): number;
}

export function healthRoutes(router: Router, readiness: Readiness): void {
  router.add('GET', '/healthz', [step('alive', ({ res }) => sendJson(res, 200, { status: 'ok' }))]);
  router.add('GET', '/readyz', [
    step('ready', async ({ res }) => {
      if (!readiness.ready()) throw new ProtocolError('not_ready', 'The proxy is starting or shutting down.');
      if (!(await readiness.database())) {
        throw new ProtocolError('not_ready', 'The proxy cannot reach its database.', {
          headers: { 'retry-after': String(STORE_RETRY_AFTER_S) },
        });
      }
      sendJson(res, 200, { status: 'ready', capabilities: readiness.capabilities() });
    }),
  ]);
}
