/**
 * Issue 12, logs: `--log-format json|pretty` (config `log_format`). JSON is one object per line
 * with `level` (a label), `time` (ISO 8601) and `msg`; pretty is human text, no JSON.
 */
import { describe, expect, it } from 'vitest';
import { runCli } from '../../../src/cli/main.js';
import { startProtocol } from '../../helpers/protocol.js';
import { PETSTORE } from '../../helpers/proxy.js';

/** A proxy whose own logger (level and format from its settings) writes into `lines`. */
async function loggedRequests(logFormat: 'json' | 'pretty'): Promise<string[]> {
  const lines: string[] = [];
  const p = await startProtocol({ overrides: { logFormat }, logSink: (line) => lines.push(line) });
  try {
    const reply = await p.request('GET', '/.well-known/agent-configuration');
    expect(reply.status).toBe(200);
  } finally {
    await p.close();
  }
  return lines;
}

describe('log format', () => {
  it('json: one object per line, with a level label, an ISO time and msg', async () => {
    const lines = await loggedRequests('json');
    expect(lines.length).toBeGreaterThan(0);
    const records = lines.map((line) => {
      expect(line.indexOf('\n')).toBe(line.length - 1);
      return JSON.parse(line) as Record<string, unknown>;
    });
    for (const r of records) {
      expect(r.level).toMatch(/^(debug|info|warn|error)$/);
      expect(new Date(String(r.time)).toISOString()).toBe(r.time);
      expect(typeof r.msg).toBe('string');
    }
    expect(records.find((r) => r.msg === 'request')).toMatchObject({
      level: 'info',
      route: 'GET /.well-known/agent-configuration',
      status: 200,
      decision: 'allow',
      client_ip: '127.0.0.1',
    });
  });

  it('pretty: human-readable text with the level and message, and no JSON', async () => {
    const lines = await loggedRequests('pretty');
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(() => JSON.parse(line) as unknown).toThrow();
    const request = lines.find((l) => / INFO: request\n/.test(l));
    expect(request).toBeDefined();
    expect(request).toMatch(/^\[\d{4}-\d\d-\d\dT[\d:.]+Z\] INFO: request/);
    expect(request).toContain('client_ip: "127.0.0.1"');
  });

  it('--log-format bogus is refused, naming the allowed values', async () => {
    let stderr = '';
    const code = await runCli(['check', '--spec', PETSTORE, '--log-format', 'bogus'], {
      out: () => undefined,
      err: (t) => void (stderr += t),
    });
    expect(code).toBe(2);
    expect(stderr).toContain('--log-format "bogus": must be one of json, pretty');
  });
});
