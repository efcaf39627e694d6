/**
 * The primary's sum of the counters and histograms that workers which exited last reported
 * (src/cluster/metrics.ts): kept in the aggregated metrics so that they never go backwards.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { sumCumulative } from '../../../src/cluster/metrics.js';

/** A worker's registry as it reports it: a counter, a histogram and a gauge. */
async function report(count: number, gauge: number): Promise<Parameters<typeof sumCumulative>[1]> {
  const registry = new Registry();
  const counter = new Counter({
    name: 'calls_total',
    help: 'h',
    labelNames: ['a', 'b'],
    registers: [registry],
  });
  counter.inc({ a: 'x', b: 'y' }, count);
  new Histogram({ name: 'seconds', help: 'h', buckets: [1], registers: [registry] }).observe(0.5);
  new Gauge({ name: 'held', help: 'h', registers: [registry] }).set(gauge);
  return (await registry.getMetricsAsJSON()) as unknown as Parameters<typeof sumCumulative>[1];
}

describe('sumCumulative', () => {
  it('sums counters and histograms series by series, and leaves gauges out', async () => {
    const retired = sumCumulative(sumCumulative([], await report(3, 7)), await report(4, 9));
    const byName = new Map(retired.map((m) => [m.name, m]));
    expect(byName.has('held')).toBe(false);
    expect(byName.get('calls_total')?.values).toEqual([{ value: 7, labels: { a: 'x', b: 'y' } }]);
    const histogram = byName.get('seconds')?.values ?? [];
    expect(histogram.find((v) => v.metricName === 'seconds_count')?.value).toBe(2);
    expect(histogram.find((v) => v.metricName === 'seconds_bucket' && v.labels.le === 1)?.value).toBe(2);
  });

  it('matches a series whatever the order of its labels', () => {
    const metric = (labels: Record<string, string>) => ({
      name: 'calls_total',
      help: 'h',
      type: 'counter',
      aggregator: 'sum',
      values: [{ value: 1, labels }],
    });
    const summed = sumCumulative([metric({ a: 'x', b: 'y' })], [metric({ b: 'y', a: 'x' })]);
    expect(summed[0]?.values).toEqual([{ value: 2, labels: { a: 'x', b: 'y' } }]);
  });
});
