/**
 * Change notices between replicas on one PostgreSQL (issue 13; §10.2 event-driven invalidation,
 * §10.10.2 notification streams). A write transaction that changed hosts, agents or grants (what
 * the hot caches hold) or approvals (what notification streams wait on) ends with one
 * `pg_notify` on CHANNEL before its COMMIT (pg-store.ts): PostgreSQL delivers it only if the
 * transaction commits, and a transaction re-run after a conflict sends it once, from the attempt
 * that committed (a rolled-back attempt's notice is discarded with it).
 *
 * Each replica listens on a dedicated connection (not one of the pool's) and probes it every
 * PROBE_INTERVAL_MS; a probe unanswered within PROBE_TIMEOUT_MS, an error or a closed connection
 * means notices may be lost from then on: `onDown`, then a new connection every RETRY_MS until
 * one listens again (`onUp`; what was missed meanwhile is lost, so the caller drops what it
 * holds). So a replica learns of another's commit as soon as PostgreSQL delivers the notice
 * (milliseconds), or learns within PROBE_INTERVAL_MS + PROBE_TIMEOUT_MS (1.5 s) that it may not.
 *
 * The cost: one extra statement in a state-changing transaction (never on the execute path), and
 * PostgreSQL serializes the commits of notifying transactions on its notification queue.
 */
import pg from 'pg';

export const CHANGES_CHANNEL = 'agent_auth_proxy_changes';
export const PROBE_INTERVAL_MS = 500;
export const PROBE_TIMEOUT_MS = 1000;
export const RETRY_MS = 500;
/** PostgreSQL refuses a payload of 8000 bytes or more; past this, the approval ids become "all". */
const MAX_PAYLOAD_BYTES = 7000;

/** What one write transaction changed that other replicas may hold in memory. */
export class ChangeSet {
  /** A host, agent or grant row: what the hot caches hold (§10.2). */
  cache = false;
  /** Approvals updated or deleted: what notification streams wait on (§10.10.2). */
  readonly approvals = new Set<string>();
}

/** A notice as received: who sent it, and what to drop or look at again. */
export interface ChangeNotice {
  readonly origin: string;
  readonly cache: boolean;
  /** The approvals that changed, or 'all' when there were too many to name. */
  readonly approvals: readonly string[] | 'all';
}

/** The payload of `changes` from `origin`; undefined when nothing is worth a notice. */
export function noticePayload(origin: string, changes: ChangeSet): string | undefined {
  if (!changes.cache && changes.approvals.size === 0) return undefined;
  const payload = JSON.stringify({ o: origin, c: changes.cache, a: [...changes.approvals] });
  if (Buffer.byteLength(payload) <= MAX_PAYLOAD_BYTES) return payload;
  return JSON.stringify({ o: origin, c: changes.cache, a: 'all' });
}

/** A payload read back; undefined for anything else on the channel. */
export function parseNotice(payload: string | undefined): ChangeNotice | undefined {
  let value: unknown;
  try {
    value = JSON.parse(payload ?? '');
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const { o, c, a } = value as Record<string, unknown>;
  if (typeof o !== 'string' || typeof c !== 'boolean') return undefined;
  if (a === 'all') return { origin: o, cache: c, approvals: 'all' };
  if (!Array.isArray(a) || !a.every((id) => typeof id === 'string')) return undefined;
  return { origin: o, cache: c, approvals: a };
}

export interface ChangeHandlers {
  /** Another replica committed this. */
  onNotice(notice: ChangeNotice): void;
  /** Notices may be lost from now until `onUp` (also when the first connection fails). */
  onDown(error: Error): void;
  /** Listening (again): whatever was sent while down was lost. */
  onUp(): void;
}

export interface ChangeListenerOptions {
  readonly url: string;
  /** This replica's id: its own notices are skipped (it acted on them when it committed). */
  readonly origin: string;
  readonly connectionTimeoutMs: number;
  readonly probeIntervalMs?: number;
  readonly probeTimeoutMs?: number;
  readonly retryMs?: number;
}

/** The dedicated listening connection, its probe and its reconnection (see the file comment). */
export class PgChangeListener {
  readonly #options: ChangeListenerOptions;
  readonly #handlers: ChangeHandlers;
  /** Bumped for every connection: events of an older one are ignored. */
  #attempt = 0;
  #state: 'starting' | 'up' | 'down' = 'starting';
  #client: pg.Client | undefined;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: ChangeListenerOptions, handlers: ChangeHandlers) {
    this.#options = options;
    this.#handlers = handlers;
  }

  /** Connects and listens; resolves once listening, or once the first attempt failed (down, retrying). */
  start(): Promise<void> {
    return this.#connect();
  }

  get listening(): boolean {
    return this.#state === 'up';
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#attempt++;
    clearTimeout(this.#timer);
    const client = this.#client;
    this.#client = undefined;
    if (client) await endWithin(client, this.#options.probeTimeoutMs ?? PROBE_TIMEOUT_MS);
  }

  async #connect(): Promise<void> {
    if (this.#closed) return;
    const attempt = ++this.#attempt;
    const { url, connectionTimeoutMs, origin } = this.#options;
    const client = new pg.Client({
      connectionString: url,
      connectionTimeoutMillis: connectionTimeoutMs,
      keepAlive: true,
      application_name: 'agent-auth-proxy changes',
    });
    this.#client = client;
    const lost = (err: unknown): void => this.#lost(attempt, client, err);
    client.on('error', lost);
    client.on('end', () => lost(new Error('the listening connection closed')));
    client.on('notification', (message) => {
      if (attempt !== this.#attempt || message.channel !== CHANGES_CHANNEL) return;
      const notice = parseNotice(message.payload);
      if (!notice || notice.origin === origin) return;
      try {
        this.#handlers.onNotice(notice);
      } catch {
        // The handler's failure is its own; the connection goes on listening.
      }
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANGES_CHANNEL}`);
    } catch (err) {
      lost(err);
      return;
    }
    if (attempt !== this.#attempt) {
      // Closed (or given up on) while it connected.
      void endWithin(client, this.#options.probeTimeoutMs ?? PROBE_TIMEOUT_MS);
      return;
    }
    this.#state = 'up';
    this.#handlers.onUp();
    this.#schedule(attempt, client);
  }

  #schedule(attempt: number, client: pg.Client): void {
    this.#timer = setTimeout(
      () => this.#probe(attempt, client),
      this.#options.probeIntervalMs ?? PROBE_INTERVAL_MS,
    );
    this.#timer.unref();
  }

  /** A round trip on the listening connection: answered in time, it still delivers notices. */
  #probe(attempt: number, client: pg.Client): void {
    if (attempt !== this.#attempt) return;
    const timeoutMs = this.#options.probeTimeoutMs ?? PROBE_TIMEOUT_MS;
    const deadline = setTimeout(
      () =>
        this.#lost(attempt, client, new Error(`the listening connection did not answer in ${timeoutMs} ms`)),
      timeoutMs,
    );
    deadline.unref();
    client.query('SELECT 1').then(
      () => {
        clearTimeout(deadline);
        if (attempt === this.#attempt) this.#schedule(attempt, client);
      },
      (err: unknown) => {
        clearTimeout(deadline);
        this.#lost(attempt, client, err);
      },
    );
  }

  #lost(attempt: number, client: pg.Client, err: unknown): void {
    if (attempt !== this.#attempt || this.#closed) return;
    this.#attempt++;
    clearTimeout(this.#timer);
    this.#client = undefined;
    // Not awaited: a connection to a server that went silent may take its time to close.
    void endWithin(client, this.#options.probeTimeoutMs ?? PROBE_TIMEOUT_MS);
    if (this.#state !== 'down') {
      this.#state = 'down';
      this.#handlers.onDown(err instanceof Error ? err : new Error(String(err)));
    }
    this.#timer = setTimeout(() => void this.#connect(), this.#options.retryMs ?? RETRY_MS);
    this.#timer.unref();
  }
}

/**
 * Ends `client`, waiting at most `ms`: a connection to a server that went silent never answers
 * the goodbye, so past that its socket is destroyed rather than left to keep the process alive.
 */
async function endWithin(client: pg.Client, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const ended = client.end().then(
    () => true,
    () => true,
  );
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
    timer.unref();
  });
  const done = await Promise.race([ended, late]);
  clearTimeout(timer);
  if (!done)
    (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
}
