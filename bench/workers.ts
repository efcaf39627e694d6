/**
 * Worker benchmark (issue 14, `npm run bench -- --workers N`): the execute workload of
 * replicas.ts (GET one pet through `POST /capability/execute`, a fresh agent JWT per request, every
 * check on) at concurrency 32, sent to the upstream directly, through the floor relay of
 * execute.ts (for reference), and through the proxy on PostgreSQL with `--workers 1` and with
 * `--workers N`: one port each, the primary handing connections to its workers. Each proxy has a
 * database of its own on one PostgreSQL server, so neither's change notices reach the other. The
 * routes take turns in rounds; every request must be answered 200. CPU per request is each kind of
 * process's user + system time (a proxy's: the primary and its workers together), and the share of
 * each worker shows that all of them served.
 */
import type { Pool } from 'undici';
import { inTurns, loadPool, startFloorChild } from './execute.js';
import {
  childPids,
  directTarget,
  executeCalls,
  ownCpuSeconds,
  phase,
  registerAgent,
  startProxyProcess,
  summarize,
  withPostgresBench,
  type RouteResult,
  type RunningProxy,
  type Target,
} from './replicas.js';

const CONCURRENCY = 32;

export type WorkersRoute = 'direct' | 'floor' | 'one' | 'many';
export const WORKERS_ROUTES: readonly WorkersRoute[] = ['direct', 'floor', 'one', 'many'];

export interface WorkersResult {
  readonly workers: number;
  readonly c32: Readonly<Record<WorkersRoute, RouteResult>>;
  /** Each worker's share of the `--workers N` proxy's worker CPU over the measured rounds. */
  readonly workerShares: readonly number[];
  /** The `--workers N` primary's own CPU per request it served, µs (accepting, handing out connections). */
  readonly primaryCpuUs: number;
}

export async function runWorkersBench(options: {
  readonly workers: number;
  readonly requests?: number;
}): Promise<WorkersResult> {
  const requests = options.requests ?? 20_000;
  return withPostgresBench(
    'workers',
    async ({ children, pools, upstream, postgres, postmaster, host, policy }) => {
      const start = async (workers: number): Promise<RunningProxy> => {
        const db = await postgres.createDatabase();
        const proxy = await startProxyProcess({
          upstreamUrl: upstream.url,
          db,
          policy,
          children,
          args: ['--workers', String(workers)],
        });
        if (workers > 1) await allWorkers(proxy.pid, workers);
        return proxy;
      };
      const one = await start(1);
      const many = await start(options.workers);

      const pool = (url: string): Pool => loadPool(url, pools);
      const through = async (proxy: RunningProxy): Promise<Target> => ({
        pools: [pool(proxy.url)],
        upstreamPid: upstream.pid,
        proxyPids: [proxy.pid],
        usesPostgres: true,
        calls: executeCalls(await registerAgent(proxy.url, host)),
      });
      // The floor checks the signature of the agent registered on the one-worker proxy (its key).
      const floorAgent = await registerAgent(one.url, host);
      const floor = await startFloorChild({
        upstreamUrl: upstream.url,
        keyX: floorAgent.key.publicJwk.x,
        mode: 'floor',
        keep: (child) => children.push(child),
      });
      const targets: Record<WorkersRoute, Target> = {
        direct: directTarget(pool(upstream.url), upstream.pid),
        floor: {
          pools: [pool(floor.url)],
          upstreamPid: upstream.pid,
          proxyPids: [floor.pid],
          usesPostgres: false,
          calls: executeCalls(floorAgent),
        },
        one: await through(one),
        many: await through(many),
      };

      // Warm every route (connections, JIT, caches) first.
      for (const route of WORKERS_ROUTES) {
        await phase(targets[route], await targets[route].calls(500), 8, postmaster);
      }
      const workerPids = childPids(many.pid);
      const before = workerPids.map((pid) => ownCpuSeconds(pid) ?? 0);
      const primaryBefore = ownCpuSeconds(many.pid) ?? 0;
      const samples = await inTurns(WORKERS_ROUTES, requests, async (route, count) =>
        phase(targets[route], await targets[route].calls(count), CONCURRENCY, postmaster),
      );
      const used = workerPids.map((pid, i) => (ownCpuSeconds(pid) ?? 0) - (before[i] ?? 0));
      const total = used.reduce((a, b) => a + b, 0);
      const primaryUsed = (ownCpuSeconds(many.pid) ?? 0) - primaryBefore;
      const manyRequests = samples.many.reduce((n, sample) => n + sample.latencies.length, 0);
      return {
        workers: options.workers,
        c32: {
          direct: summarize(samples.direct),
          floor: summarize(samples.floor),
          one: summarize(samples.one),
          many: summarize(samples.many),
        },
        workerShares: used.map((u) => (total > 0 ? u / total : 0)),
        primaryCpuUs: (primaryUsed * 1e6) / manyRequests,
      };
    },
  );
}

/**
 * Waits until the primary `pid` has forked its `workers` (it forks the others once the first
 * serves): /readyz answered by the first says nothing of the others. The warm-up that follows
 * gives a late one time to listen; the worker shares show whether every one served.
 */
async function allWorkers(pid: number, workers: number): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (childPids(pid).length === workers) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the proxy did not fork ${workers} workers within 60 s`);
}
