/**
 * `GET /metrics`: the Prometheus exposition text. On the internal listener it is open (it listens
 * on loopback or a pod-internal address); on the public port, where it would tell anyone which
 * capabilities are used and how often, it takes the admin token as a Bearer and is absent
 * without one (README "Metrics").
 */
import type { Exposition } from '../../metrics.js';
import { step, type SharedStep } from '../pipeline.js';
import type { Router } from '../router.js';
import { secretToken, type TokenStepOptions } from '../steps/tokens.js';

export function metricsRoutes(
  router: Router,
  options: {
    /** This process's metrics, or with --workers every worker's aggregated (src/cluster/metrics.ts). */
    exposition: () => Promise<Exposition>;
    guard?: TokenStepOptions & { adminToken: string };
  },
): void {
  const { exposition, guard } = options;
  const steps: SharedStep[] = guard ? [secretToken(guard, 'admin token', [guard.adminToken])] : [];
  router.add('GET', '/metrics', [
    ...steps,
    step('metrics', async ({ res }) => {
      const { contentType, text } = await exposition();
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
