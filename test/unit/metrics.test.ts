/** The Metrics object alone: closed label sets, a registry per instance, gauges read at scrape time. */
import { AggregatorRegistry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { Metrics } from '../../src/metrics.js';
import { recordRequestMetrics } from '../../src/http/request-metrics.js';
import { newDecision } from '../../src/http/pipeline.js';

const metrics = (): Metrics => new Metrics({ capabilities: ['get_item'], apis: ['shop'] });

describe('Metrics', () => {
  it('counts a capability outside the catalog as unknown', async () => {
    const m = metrics();
    m.execution('get_item', null);
    m.execution('no_such_thing', 'capability_not_found');
    m.execution(null, 'invalid_jwt');
    const { text } = await m.exposition();
    expect(text).toContain('agent_auth_proxy_executions_total{capability="get_item",outcome="success"} 1');
    expect(text).toContain(
      'agent_auth_proxy_executions_total{capability="unknown",outcome="capability_not_found"} 1',
    );
    expect(text).toContain('agent_auth_proxy_executions_total{capability="unknown",outcome="invalid_jwt"} 1');
    expect(text).not.toContain('no_such_thing');
  });

  it('reads the gauges from their sources when scraped, and shows 0-valued closed sets', async () => {
    const m = metrics();
    let pending = 3;
    m.watch({ pendingApprovals: () => Promise.resolve(pending), replayCacheSize: () => 7 });
    expect((await m.exposition()).text).toContain('agent_auth_proxy_approvals_pending 3');
    pending = 1;
    const { text, contentType } = await m.exposition();
    expect(text).toContain('agent_auth_proxy_approvals_pending 1');
    expect(text).toContain('agent_auth_proxy_replay_cache_entries 7');
    expect(text).toContain('agent_auth_proxy_rate_limited_total{limit="per_capability"} 0');
    expect(text).toContain('agent_auth_proxy_config_reloads_total{result="failure"} 0');
    expect(text).toContain(
      'agent_auth_proxy_connections_refused_total{cap="max_connections",outcome="closed"} 0',
    );
    expect(contentType).toMatch(/^text\/plain/);
  });

  it('keeps one registry per instance', async () => {
    const a = metrics();
    const b = metrics();
    a.registration(null);
    expect((await a.exposition()).text).toContain(
      'agent_auth_proxy_registrations_total{outcome="success"} 1',
    );
    expect((await b.exposition()).text).not.toContain('agent_auth_proxy_registrations_total{');
  });
});

describe('workers aggregated (--workers, src/cluster/metrics.ts)', () => {
  it('sums counters and the replay caches, but not the pending approvals every worker counts', async () => {
    const workers = [metrics(), metrics()];
    workers.forEach((m, i) => {
      m.watch({ pendingApprovals: () => Promise.resolve(4), replayCacheSize: () => 10 + i });
      m.execution('get_item', null);
    });
    const merged = AggregatorRegistry.aggregate(
      await Promise.all(workers.map((m) => m.registry.getMetricsAsJSON())),
    );
    const text = await merged.metrics();
    expect(text).toContain('agent_auth_proxy_executions_total{capability="get_item",outcome="success"} 2');
    expect(text).toContain('agent_auth_proxy_replay_cache_entries 21');
    expect(text).toContain('agent_auth_proxy_approvals_pending 4');
  });
});

describe('request metrics from the decision record', () => {
  it('labels by route pattern, other when no route matched', async () => {
    const m = metrics();
    const record = recordRequestMetrics(m);
    const polled = newDecision('r1', 'GET', '127.0.0.1');
    polled.route = 'GET /capability/status/:id';
    polled.status = 200;
    const stray = newDecision('r2', 'GET', '127.0.0.1');
    stray.status = 404;
    record(polled);
    record(polled);
    record(stray);
    const { text } = await m.exposition();
    expect(text).toContain('agent_auth_proxy_requests_total{route="/capability/status/:id",status="200"} 2');
    expect(text).toContain('agent_auth_proxy_requests_total{route="other",status="404"} 1');
  });
});
