/**
 * `GET /metrics` with `--workers`: whichever worker the scrape lands on answers every worker's
 * metrics, aggregated, so one scrape target still means the whole deployment. The worker asks the
 * primary over the cluster's IPC channel; the primary asks each worker that serves for its
 * registry (as JSON), waits for each at most WORKER_ANSWER_MS, and aggregates what arrived with
 * prom-client's AggregatorRegistry.aggregate (counters and histograms summed, gauges by their
 * `aggregator`), adding `workers_reported` and `workers_expected`. The primary serves no HTTP.
 *
 * Not prom-client's clusterMetrics(): it asks every connected worker, one still starting (whose
 * registry does not exist yet, so it never answers) or hung too, and then fails the whole scrape
 * after 5 s; it takes neither a set of workers nor a timeout of its own.
 *
 * Counters and histograms never go backwards when a worker restarts or misses a scrape (Prometheus
 * would read a reset, and rate() a spike): the primary keeps each worker's last answer, counts the
 * cumulative series of one that did not answer in time from it, and adds those of every worker
 * that exited, as last answered, to the sums from then on. What a worker counted after its last
 * answer and before it died is lost: an undercount, never a reset.
 */
import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry, Gauge, type PrometheusContentType, type Registry } from 'prom-client';
import { METRIC_PREFIX, type Exposition } from '../metrics.js';

/** A worker asks the primary for the aggregated metrics, and gets this answer. */
const METRICS_REQUEST = 'agent-auth-proxy:metrics';
/** The primary asks a worker for its own metrics, and gets this answer. */
const COLLECT = 'agent-auth-proxy:metrics-collect';

/** How long the primary waits for each worker's metrics: a hung worker costs a scrape this much. */
const WORKER_ANSWER_MS = 1_500;
/** How long a worker waits for the primary's answer: the slowest worker, aggregation, a margin. */
const ANSWER_TIMEOUT_MS = WORKER_ANSWER_MS + 2_000;

/**
 * One metric as prom-client's getMetricsAsJSON gives it, as it crosses the IPC channel. Its
 * typings say `type` is an enum; it is the text (`counter`, `histogram`, …).
 */
interface MetricJson {
  readonly name: string;
  readonly help: string;
  readonly type: string;
  readonly aggregator: string;
  readonly values: readonly MetricValueJson[];
}

interface MetricValueJson {
  readonly value: number;
  readonly labels: Readonly<Record<string, string | number>>;
  /** A histogram's `_bucket`, `_sum` or `_count` series. */
  readonly metricName?: string;
}

type Snapshot = readonly MetricJson[];

interface MetricsRequest {
  readonly type: typeof METRICS_REQUEST;
  readonly id: number;
}

interface MetricsAnswer extends MetricsRequest {
  readonly text?: string;
  readonly error?: string;
}

interface CollectRequest {
  readonly type: typeof COLLECT;
  readonly id: number;
}

interface CollectAnswer extends CollectRequest {
  /** Null while the worker does not serve yet (it has no registry), or when collecting failed. */
  readonly metrics: Snapshot | null;
}

function isMessage<T extends string>(message: unknown, type: T): message is { type: T; id: number } {
  return (
    typeof message === 'object' &&
    message !== null &&
    (message as { type?: unknown }).type === type &&
    typeof (message as { id?: unknown }).id === 'number'
  );
}

/** The registry a worker's metrics are read from, once it serves. */
let served: Registry | undefined;

/**
 * In a worker, from its start (before its registry exists): answers the primary's requests for
 * this worker's metrics at once, with none until it serves, so the primary never waits on it.
 */
export function answerMetricsCollection(): void {
  process.on('message', (message: unknown) => {
    if (!isMessage(message, COLLECT)) return;
    void ownMetrics().then((metrics) =>
      process.send?.(
        { type: COLLECT, id: message.id, metrics } satisfies CollectAnswer,
        undefined,
        undefined,
        () => undefined,
      ),
    );
  });
}

async function ownMetrics(): Promise<Snapshot | null> {
  if (!served) return null;
  try {
    return (await served.getMetricsAsJSON()) as unknown as Snapshot;
  } catch {
    // A gauge's collect failed: this worker is left out of this scrape, and workers_reported says so.
    return null;
  }
}

/**
 * In a worker, once its registry exists: from now on the primary gets this registry's metrics;
 * returns the exposition to serve, which asks the primary for every worker's.
 */
export function workerExposition(registry: Registry): () => Promise<Exposition> {
  served = registry;
  const waiting = new Map<number, (answer: MetricsAnswer) => void>();
  let next = 0;
  process.on('message', (message: unknown) => {
    if (isMessage(message, METRICS_REQUEST)) waiting.get(message.id)?.(message);
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
      process.send?.({ type: METRICS_REQUEST, id } satisfies MetricsRequest, undefined, undefined, (err) => {
        if (err) waiting.get(id)?.({ type: METRICS_REQUEST, id, error: err.message });
      });
    });
}

export interface AggregationOptions {
  /** The workers that serve now: those asked for their metrics. */
  readonly serving: () => Iterable<Worker>;
  /** How many workers there should be (`--workers N`). */
  readonly expected: number;
}

/**
 * In the primary: answers each worker's request with every serving worker's metrics, aggregated.
 * Returns a function that stops answering.
 */
export function serveAggregatedMetrics(options: AggregationOptions): () => void {
  const collector = new Collector(options);
  const onMessage = (worker: Worker, message: unknown): void => {
    if (isMessage(message, COLLECT)) collector.answered(worker, message as CollectAnswer);
    if (!isMessage(message, METRICS_REQUEST)) return;
    const answer = (fields: { text: string } | { error: string }): void => {
      if (worker.isConnected()) {
        worker.send(
          { type: METRICS_REQUEST, id: message.id, ...fields } satisfies MetricsAnswer,
          undefined,
          () => undefined,
        );
      }
    };
    collector.aggregated().then(
      (text) => answer({ text }),
      (err: unknown) => answer({ error: err instanceof Error ? err.message : String(err) }),
    );
  };
  const onExit = (worker: Worker): void => collector.exited(worker);
  cluster.on('message', onMessage);
  cluster.on('exit', onExit);
  return () => {
    cluster.off('message', onMessage);
    cluster.off('exit', onExit);
  };
}

class Collector {
  /** Each live worker's last answer. */
  readonly #latest = new Map<Worker, Snapshot>();
  /** The counters and histograms of the workers that exited, summed, as each last answered. */
  #retired: Snapshot = [];
  readonly #asks = new Map<number, { worker: Worker; done: (answered: boolean) => void }>();
  #next = 0;

  constructor(private readonly options: AggregationOptions) {}

  async aggregated(): Promise<string> {
    const asked = [...this.options.serving()];
    const answered = await Promise.all(asked.map((worker) => this.#ask(worker)));
    const fresh = new Set(asked.filter((_, i) => answered[i]));
    // Only workers still alive: one that exited since it answered is in #retired already.
    const parts = [...this.#latest].map(([worker, snapshot]) =>
      fresh.has(worker) ? snapshot : cumulative(snapshot),
    );
    const registry = AggregatorRegistry.aggregate<PrometheusContentType>([...parts, this.#retired]);
    const reported = [...fresh].filter((worker) => this.#latest.has(worker)).length;
    workersGauge(
      registry,
      'reported',
      `Workers whose metrics are in this answer: those serving that answered within ${WORKER_ANSWER_MS / 1000} s (--workers).`,
      reported,
    );
    workersGauge(registry, 'expected', 'Workers there should be (--workers N).', this.options.expected);
    return registry.metrics();
  }

  answered(worker: Worker, answer: CollectAnswer): void {
    const ask = this.#asks.get(answer.id);
    if (!ask || ask.worker !== worker) return;
    // Kept as it arrives, so that a worker exiting right after is retired with this answer.
    if (answer.metrics) this.#latest.set(worker, answer.metrics);
    ask.done(answer.metrics !== null);
  }

  exited(worker: Worker): void {
    for (const ask of this.#asks.values()) if (ask.worker === worker) ask.done(false);
    const last = this.#latest.get(worker);
    this.#latest.delete(worker);
    if (last) this.#retired = sumCumulative(this.#retired, last);
  }

  /** Resolves with whether `worker` answered with its metrics within WORKER_ANSWER_MS. */
  #ask(worker: Worker): Promise<boolean> {
    if (!worker.isConnected()) return Promise.resolve(false);
    const id = this.#next++;
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => done(false), WORKER_ANSWER_MS);
      const done = (answered: boolean): void => {
        clearTimeout(timer);
        this.#asks.delete(id);
        resolve(answered);
      };
      this.#asks.set(id, { worker, done });
      worker.send({ type: COLLECT, id } satisfies CollectRequest, undefined, (err) => {
        if (err) done(false);
      });
    });
  }
}

function workersGauge(registry: Registry, which: 'reported' | 'expected', help: string, value: number): void {
  new Gauge({ name: `${METRIC_PREFIX}workers_${which}`, help, registers: [registry] }).set(value);
}

/** Counters and histograms only: what may be carried on summed (a gauge of a dead worker is stale). */
function cumulative(snapshot: Snapshot): Snapshot {
  return snapshot.filter((metric) => metric.type === 'counter' || metric.type === 'histogram');
}

/** `a` and the cumulative metrics of `b`, summed by metric, series and labels. */
export function sumCumulative(a: Snapshot, b: Snapshot): Snapshot {
  const byName = new Map<string, MetricJson>();
  for (const metric of [...a, ...cumulative(b)]) {
    const seen = byName.get(metric.name);
    byName.set(metric.name, seen ? { ...seen, values: sumValues(seen.values, metric.values) } : metric);
  }
  return [...byName.values()];
}

function sumValues(a: readonly MetricValueJson[], b: readonly MetricValueJson[]): MetricValueJson[] {
  const byKey = new Map<string, MetricValueJson>();
  for (const value of [...a, ...b]) {
    const key = seriesKey(value);
    const seen = byKey.get(key);
    byKey.set(key, seen ? { ...seen, value: seen.value + value.value } : value);
  }
  return [...byKey.values()];
}

/** The series and its labels, in an order of their own (a worker may list labels in any order). */
function seriesKey(value: MetricValueJson): string {
  const labels = Object.entries(value.labels).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
  return JSON.stringify([value.metricName ?? '', labels]);
}
