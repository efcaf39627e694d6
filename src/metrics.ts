/**
 * Prometheus metrics (issue 12), all named `agent_auth_proxy_*`, in a registry of their own: the
 * global one would be shared by every proxy of a process (tests run several). Label values come
 * from closed sets only (catalog capability names, route patterns, error codes, limit names, API
 * ids), never from ids or anything a client sends, so the series count stays bounded.
 *
 * Nothing here knows HTTP, protocol or storage: the composition root passes the recording
 * methods down as callbacks, and the gauges read what they show through `watch` at scrape time.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type LabelValues } from 'prom-client';
import type { ErrorCode } from './errors.js';
import { StoreUnavailableError } from './storage/errors.js';

export const METRIC_PREFIX = 'agent_auth_proxy_';

/** Which rate limit refused a request (policy `rate_limits.*`, README "Metrics"). */
export const LIMIT_NAMES = [
  'per_ip',
  'unknown_host_registration',
  'failed_auth_per_ip',
  'per_host',
  'per_agent',
  'per_user',
  'per_capability',
  'device_code_misses',
  'pending_hosts_per_client',
  'oidc_starts_per_client',
] as const;
export type LimitName = (typeof LIMIT_NAMES)[number];

/** Which time claim refused a JWT (§8.2 clock skew). */
export type ClockClaim = 'iat' | 'exp' | 'nbf';

/** Which connection cap refused a connection (config `server.*`, README "Bounds"). */
export const CONNECTION_CAPS = ['max_connections', 'max_connections_per_ip'] as const;
export type ConnectionCap = (typeof CONNECTION_CAPS)[number];
/** answered: kept to be answered 429/503; closed: closed on arrival, past the refusals' own bounds. */
export type RefusalOutcome = 'answered' | 'closed';

/** What `GET /metrics` answers. */
export interface Exposition {
  readonly contentType: string;
  readonly text: string;
}

/** What the gauges read when Prometheus scrapes (cheap: a counter in memory, an indexed count). */
export interface MetricSources {
  readonly pendingApprovals: () => Promise<number>;
  readonly replayCacheSize: () => number;
}

export interface MetricsOptions {
  /** Capability names of the catalog; other names are counted as `unknown`. */
  readonly capabilities: Iterable<string>;
  /** API ids (config), whose upstream histogram children are resolved once here. */
  readonly apis: Iterable<string>;
}

/**
 * How often the event-loop delay is sampled (prom-client's default is 10 ms). Each sample wakes the
 * loop twice: at 10 ms an idle proxy woke about 200 times a second and used 0.6 % of a core doing
 * nothing (37 ticks a minute), a cost every sidecar pays; at 50 ms, 40 times and 0.3 % (18 ticks).
 * A stall of 50 ms or more is still always seen.
 */
const EVENT_LOOP_SAMPLE_MS = 50;

// Upstream answers range from a few milliseconds to the 30 s default timeout.
const UPSTREAM_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
// A WAL commit with synchronous=FULL is an fsync: sub-millisecond to tens of milliseconds.
// A validator's compilation runs on the event loop in one piece: from a millisecond to about one second.
const COMPILE_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
const DATABASE_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

type Child = { inc(): void };
type Timer = { observe(seconds: number): void };

/**
 * One label combination's count since prom-client last collected, as a plain number: prom-client
 * hashes the labels on every `inc`, a child's too (about 0.5 µs), and two counters are counted on
 * every request. Each scrape (or a worker's report to the primary) collects first, so the
 * exposition is as current as before.
 */
class Tally<T extends string> implements Child {
  pending = 0;
  constructor(readonly labels: LabelValues<T>) {}
  inc(): void {
    this.pending++;
  }
}

/** A counter whose per-request label combinations are tallied in memory until it collects. */
function talliedCounter<T extends string>(
  options: { name: string; help: string; labelNames: readonly T[]; registers: Registry[] },
  tallies: readonly Tally<T>[],
): Counter<T> {
  return new Counter<T>({
    ...options,
    collect() {
      for (const tally of tallies) {
        if (tally.pending === 0) continue;
        this.inc(tally.labels, tally.pending);
        tally.pending = 0;
      }
    },
  });
}

export class Metrics {
  readonly registry = new Registry();
  #capabilities: ReadonlySet<string>;
  readonly #registrations: Counter<'outcome'>;
  readonly #rateLimited: Counter<'limit'>;
  readonly #clockRefusals: Counter<'claim'>;
  readonly #configReloads: Counter<'result'>;
  readonly #connectionsRefused: Counter<'cap' | 'outcome'>;
  readonly #upstream: Histogram<'api'>;
  readonly #database: Histogram<'transaction'>;
  readonly #compiles: Histogram;
  // Label children resolved once per label combination, in nested maps so that the per-request
  // path is two Map lookups and allocates nothing.
  readonly #requestChildren = new Map<string, Map<number, Child>>();
  readonly #executionChildren = new Map<string, Map<string, Child>>();
  readonly #registrationChildren = new Map<string, Child>();
  readonly #requestTallies: Tally<'route' | 'status'>[] = [];
  readonly #executionTallies: Tally<'capability' | 'outcome'>[] = [];
  readonly #upstreamChildren = new Map<string, Timer>();
  readonly #stateWrites: Timer;
  readonly #activityWrites: Timer;
  #sources: MetricSources | undefined;

  constructor(options: MetricsOptions) {
    const registers = [this.registry];
    this.#capabilities = new Set(options.capabilities);
    collectDefaultMetrics({
      register: this.registry,
      prefix: METRIC_PREFIX,
      eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS,
    });
    talliedCounter(
      {
        name: `${METRIC_PREFIX}requests_total`,
        help: 'HTTP requests by route pattern (other: no route matched) and status.',
        labelNames: ['route', 'status'],
        registers,
      },
      this.#requestTallies,
    );
    talliedCounter(
      {
        name: `${METRIC_PREFIX}executions_total`,
        help: 'POST /capability/execute by capability (unknown: not in the catalog) and outcome (success or the error code).',
        labelNames: ['capability', 'outcome'],
        registers,
      },
      this.#executionTallies,
    );
    this.#registrations = new Counter({
      name: `${METRIC_PREFIX}registrations_total`,
      help: 'POST /agent/register by outcome (success or the error code).',
      labelNames: ['outcome'],
      registers,
    });
    this.#rateLimited = new Counter({
      name: `${METRIC_PREFIX}rate_limited_total`,
      help: 'Requests refused by a rate limit, by the limit that refused.',
      labelNames: ['limit'],
      registers,
    });
    this.#clockRefusals = new Counter({
      name: `${METRIC_PREFIX}jwt_clock_refusals_total`,
      help: 'Host and agent JWTs refused for time (§8.2), by claim: iat in the future, exp passed, nbf not reached (beyond lifetimes.clock_skew). A rise points at a client clock.',
      labelNames: ['claim'],
      registers,
    });
    this.#connectionsRefused = new Counter({
      name: `${METRIC_PREFIX}connections_refused_total`,
      help: 'Connections past server.max_connections or server.max_connections_per_ip, by cap and outcome (answered 503/429, or closed on arrival).',
      labelNames: ['cap', 'outcome'],
      registers,
    });
    this.#configReloads = new Counter({
      name: `${METRIC_PREFIX}config_reloads_total`,
      help: 'Configuration reloads by result.',
      labelNames: ['result'],
      registers,
    });
    this.#upstream = new Histogram({
      name: `${METRIC_PREFIX}upstream_request_duration_seconds`,
      help: 'Time from sending an upstream request to its response headers (or failure), by API.',
      labelNames: ['api'],
      buckets: UPSTREAM_BUCKETS,
      registers,
    });
    this.#database = new Histogram({
      name: `${METRIC_PREFIX}database_write_duration_seconds`,
      help: 'Duration of database write transactions (SQLite or PostgreSQL), commit included: state or activity (group-committed).',
      labelNames: ['transaction'],
      buckets: DATABASE_BUCKETS,
      registers,
    });
    this.#compiles = new Histogram({
      name: `${METRIC_PREFIX}validator_compile_duration_seconds`,
      help: 'Argument validators compiled (first use, or ahead for granted capabilities): how long each held the event loop (for one compiled on the worker thread, the evaluation of its code).',
      buckets: COMPILE_BUCKETS,
      registers,
    });
    const sources = (): MetricSources | undefined => this.#sources;
    new Gauge({
      name: `${METRIC_PREFIX}approvals_pending`,
      help: 'Approval requests waiting for a decision and not yet expired.',
      registers,
      // Every worker (--workers) counts the same table: their sum would multiply it.
      aggregator: 'max',
      // prom-client awaits an async collect before it renders the exposition. While the database
      // is unavailable (issue 13) the gauge keeps its last value: /metrics still answers, with
      // everything else it knows, when it matters most.
      async collect() {
        const s = sources();
        if (!s) return;
        try {
          this.set(await s.pendingApprovals());
        } catch (err) {
          if (!(err instanceof StoreUnavailableError)) throw err;
        }
      },
    });
    new Gauge({
      name: `${METRIC_PREFIX}replay_cache_entries`,
      help: 'JWT ids held by the replay cache (§8.4).',
      registers,
      collect() {
        const s = sources();
        if (s) this.set(s.replayCacheSize());
      },
    });
    // Closed label sets start at 0, so a rate() over them works before the first event.
    for (const limit of LIMIT_NAMES) this.#rateLimited.inc({ limit }, 0);
    for (const result of ['success', 'failure']) this.#configReloads.inc({ result }, 0);
    for (const cap of CONNECTION_CAPS) {
      for (const outcome of ['answered', 'closed']) this.#connectionsRefused.inc({ cap, outcome }, 0);
    }
    this.#stateWrites = this.#database.labels('state');
    this.#activityWrites = this.#database.labels('activity');
    for (const api of options.apis) this.#upstreamChildren.set(api, this.#upstream.labels(api));
  }

  /** The gauges' sources, known once the store and protocol state exist. */
  watch(sources: MetricSources): void {
    this.#sources = sources;
  }

  /** One finished HTTP request: `route` is the router's pattern, or `other`. */
  request(route: string, status: number): void {
    const byStatus = memo(this.#requestChildren, route, () => new Map<number, Child>());
    memo(byStatus, status, () => tallied(this.#requestTallies, { route, status: String(status) })).inc();
  }

  /**
   * A reload's catalog (issue 12): its capabilities get their own label; series of removed ones
   * stay (counters do not go back), so the label set grows only by what the operator configured.
   */
  catalogChanged(capabilities: Iterable<string>): void {
    this.#capabilities = new Set([...this.#capabilities, ...capabilities]);
  }

  /** One execution attempt; `code` null when it succeeded. */
  /** `code`: the error, or 'pending_approval' for a per-call execution waiting for a person; null: success. */
  execution(capability: string | null, code: ErrorCode | 'pending_approval' | null): void {
    const name = capability !== null && this.#capabilities.has(capability) ? capability : 'unknown';
    const outcome = code ?? 'success';
    const byOutcome = memo(this.#executionChildren, name, () => new Map<string, Child>());
    memo(byOutcome, outcome, () => tallied(this.#executionTallies, { capability: name, outcome })).inc();
  }

  registration(code: ErrorCode | null): void {
    const outcome = code ?? 'success';
    memo(this.#registrationChildren, outcome, () => this.#registrations.labels(outcome)).inc();
  }

  rateLimited(limit: LimitName): void {
    this.#rateLimited.inc({ limit });
  }

  clockRefusal(claim: ClockClaim): void {
    this.#clockRefusals.inc({ claim });
  }

  connectionRefused(cap: ConnectionCap, outcome: RefusalOutcome): void {
    this.#connectionsRefused.inc({ cap, outcome });
  }

  configReload(result: 'success' | 'failure'): void {
    this.#configReloads.inc({ result });
  }

  upstreamCall(api: string, seconds: number): void {
    (this.#upstreamChildren.get(api) ?? this.#upstream.labels(api)).observe(seconds);
  }

  validatorCompiled(seconds: number): void {
    this.#compiles.observe(seconds);
  }

  databaseWrite(transaction: 'state' | 'activity', seconds: number): void {
    (transaction === 'state' ? this.#stateWrites : this.#activityWrites).observe(seconds);
  }

  /** The exposition text (Prometheus text format 0.0.4) and its content type. */
  async exposition(): Promise<Exposition> {
    return { contentType: this.registry.contentType, text: await this.registry.metrics() };
  }
}

/** A new tally of `labels`, collected with the others of its counter. */
function tallied<T extends string>(tallies: Tally<T>[], labels: LabelValues<T>): Tally<T> {
  const tally = new Tally(labels);
  tallies.push(tally);
  return tally;
}

/** The value cached under `key`, made once. */
function memo<K, V>(map: Map<K, V>, key: K, make: () => V): V {
  let found = map.get(key);
  if (found === undefined) {
    found = make();
    map.set(key, found);
  }
  return found;
}
