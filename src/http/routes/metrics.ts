/**
 * `GET /metrics`: the Prometheus exposition text. On the internal listener it is open (it listens
 * on loopback or a pod-internal address); on the public port, where it would tell anyone which
 * capabilities are used and how often, it takes the admin token as a Bearer and is absent
 * without one (README "Metrics").
 */
import type { Metrics } from '../../metrics.js';
import { step, type SharedStep } from '../pipeline.js';
import type { Router } from '../router.js';
import { secretToken, type TokenStepOptions } from '../steps/tokens.js';

export function metricsRoutes(
  router: Router,
  options: { metrics: Metrics; guard?: TokenStepOptions & { adminToken: string } },
): void {
  const { metrics, guard } = options;
  const steps: SharedStep[] = guard ? [secretToken(guard, 'admin token', [guard.adminToken])] : [];
  router.add('GET', '/metrics', [
    ...steps,
    step('metrics', async ({ res }) => {
      const { contentType, text } = await metrics.exposition();
      res.writeHead(200, {
        'content-type': contentType,
        'content-length': Buffer.byteLength(text),
        'cache-control': 'no-store',
        'x-content-type-options': 'nosniff',
      });
      res.end(text);
    }),
  ]);
}
