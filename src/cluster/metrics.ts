/**
 * `GET /metrics` with `--workers`: whichever worker the scrape lands on answers every worker's
 * metrics, aggregated, so one scrape target still means the whole deployment. The worker asks the
 * primary over the cluster's IPC channel; the primary gathers each worker's registry through
 * prom-client's own cluster protocol (AggregatorRegistry: counters and histograms summed, gauges
 * by their `aggregator`) and sends the text back. The primary serves no HTTP itself.
 */
import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';
import type { Exposition } from '../metrics.js';

/** A worker asks the primary for the aggregated metrics, and gets this answer. */
const METRICS_REQUEST = 'agent-auth-proxy:metrics';

/** prom-client waits this long for every worker's registry (its own bound); ours a second more. */
const ANSWER_TIMEOUT_MS = 6_000;

interface MetricsRequest {
  readonly type: typeof METRICS_REQUEST;
  readonly id: number;
}

interface MetricsAnswer extends MetricsRequest {
  readonly text?: string;
  readonly error?: string;
}

function isMetricsMessage(message: unknown): message is MetricsAnswer {
  return (
    typeof message === 'object' &&
    message !== null &&
    (message as { type?: unknown }).type === METRICS_REQUEST &&
    typeof (message as { id?: unknown }).id === 'number'
  );
}

/**
 * In a worker: answers the primary's requests for this registry (prom-client installs that
 * listener when an AggregatorRegistry is made), and returns the exposition to serve, which asks
 * the primary for every worker's.
 */
export function workerExposition(registry: Registry): () => Promise<Exposition> {
  AggregatorRegistry.setRegistries([registry]);
  // Made for its side effect: the worker's listener for the primary's requests.
  new AggregatorRegistry();
  const waiting = new Map<number, (answer: MetricsAnswer) => void>();
  let next = 0;
  process.on('message', (message: unknown) => {
    if (isMetricsMessage(message)) waiting.get(message.id)?.(message);
  });
  return () =>
    new Promise<Exposition>((resolve, reject) => {
      const id = next++;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error('the primary did not answer with the metrics in time'));
      }, ANSWER_TIMEOUT_MS);
      waiting.set(id, (answer) => {
        clearTimeout(timer);
        waiting.delete(id);
        if (answer.text === undefined) reject(new Error(answer.error ?? 'no metrics'));
        else resolve({ contentType: registry.contentType, text: answer.text });
      });
      process.send?.({ type: METRICS_REQUEST, id } satisfies MetricsRequest);
    });
}

/** In the primary: answers each worker's request with every worker's metrics, aggregated. */
export function serveAggregatedMetrics(): void {
  const aggregator = new AggregatorRegistry();
  cluster.on('message', (worker: Worker, message: unknown) => {
    if (!isMetricsMessage(message)) return;
    const answer = (fields: { text: string } | { error: string }): void => {
      if (worker.isConnected()) worker.send({ type: METRICS_REQUEST, id: message.id, ...fields });
    };
    aggregator.clusterMetrics().then(
      (text) => answer({ text }),
      (err: unknown) => answer({ error: err instanceof Error ? err.message : String(err) }),
    );
  });
}
