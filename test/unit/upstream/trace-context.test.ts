/** W3C Trace Context for the upstream call (issue 12): the agent's trace goes on under a new span. */
import { describe, expect, it } from 'vitest';
import { traceContext, validTraceparent } from '../../../src/upstream/trace-context.js';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const VALID = `00-${TRACE_ID}-00f067aa0ba902b7-00`;

describe('trace context', () => {
  it('keeps a valid trace id and flags, with a new span id each time', () => {
    const a = traceContext(VALID);
    const b = traceContext(VALID);
    expect(a.traceId).toBe(TRACE_ID);
    expect(a.traceparent).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-00$`));
    expect(a.traceparent).not.toBe(VALID);
    expect(a.traceparent).not.toBe(b.traceparent);
  });

  it('starts a sampled trace without a valid header', () => {
    for (const header of [undefined, 'x', `ff-${TRACE_ID}-00f067aa0ba902b7-01`]) {
      const t = traceContext(header);
      expect(t.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(t.traceId).not.toBe(TRACE_ID);
      expect(t.traceparent).toBe(`00-${t.traceId}-${t.traceparent.slice(36, 52)}-01`);
    }
  });

  it('refuses all-zero ids, upper case and extra text', () => {
    expect(validTraceparent(`00-${'0'.repeat(32)}-00f067aa0ba902b7-01`)).toBeUndefined();
    expect(validTraceparent(`00-${TRACE_ID}-${'0'.repeat(16)}-01`)).toBeUndefined();
    expect(validTraceparent(VALID.toUpperCase())).toBeUndefined();
    expect(validTraceparent(`${VALID} `)).toBeUndefined();
    expect(validTraceparent([VALID, 'x'])).toBe(VALID);
  });
});
