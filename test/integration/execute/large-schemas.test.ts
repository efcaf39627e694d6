/**
 * A capability whose input schema is large enough to be compiled on the worker thread
 * (argument-validators.ts, OFF_THREAD_MIN_CHARS): through a running proxy, its first calls wait
 * for that compilation and are validated all the same (§5.11): an invalid body is refused with
 * every failing path and nothing is sent; a valid one goes through.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OFF_THREAD_MIN_CHARS } from '../../../src/protocol/argument-validators.js';
import { ensureBuiltCli, ROOT } from '../../helpers/cli-process.js';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import type { TestProtocol } from '../../helpers/protocol.js';

type Agent = Awaited<ReturnType<TestProtocol['activeAgent']>>;

/** One POST operation whose JSON body has 400 described string fields and a dated one. */
function largeSpec(): string {
  const properties: Record<string, unknown> = { when: { type: 'string', format: 'date-time' } };
  for (let i = 0; i < 400; i++) {
    properties[`field_${i}`] = {
      type: 'string',
      maxLength: 10,
      description: `Field ${i}. ${'Long text. '.repeat(20)}`,
    };
  }
  const doc = {
    openapi: '3.0.3',
    info: { title: 'Large', version: '1' },
    paths: {
      '/records': {
        post: {
          operationId: 'createRecord',
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { type: 'object', properties, required: ['when'] } } },
          },
          responses: {
            '200': { description: 'ok', content: { 'application/json': { schema: { type: 'object' } } } },
          },
        },
      },
    },
  };
  const file = join(mkdtempSync(join(tmpdir(), 'aap-large-')), 'large.json');
  writeFileSync(file, JSON.stringify(doc));
  return file;
}

let gw: Gateway;
let agent: Agent;
beforeAll(async () => {
  gw = await startGateway({ spec: largeSpec() });
  agent = await gw.p.activeAgent(['create_record']);
});
afterAll(() => gw?.close());

describe('a large input schema', () => {
  it('is large enough to be compiled off the event loop', () => {
    const capability = gw.p.proxy.catalog.get('create_record');
    expect(JSON.stringify(capability?.argumentsSchema).length).toBeGreaterThanOrEqual(OFF_THREAD_MIN_CHARS);
  });

  it('its first calls are validated: invalid ones refused, nothing sent; a valid one goes through', async () => {
    gw.upstream.reset();
    const calls = await Promise.all([
      gw.p.execute(agent.agent, agent.agentId, 'create_record', {
        when: 'yesterday',
        field_3: 'far too long',
      }),
      gw.p.execute(agent.agent, agent.agentId, 'create_record', { field_1: 'ok' }),
    ]);
    for (const reply of calls) {
      expect(reply.status).toBe(400);
      expect(reply.body.error).toBe('invalid_request');
    }
    expect(calls[0]?.body.errors.map((e: { path: string }) => e.path).sort()).toEqual(['/field_3', '/when']);
    expect(gw.upstream.requests).toHaveLength(0);

    const ok = await gw.p.execute(agent.agent, agent.agentId, 'create_record', {
      when: '2026-11-27T10:00:00Z',
      field_1: 'ok',
    });
    expect(ok.status).toBe(200);
    expect(gw.upstream.requests).toHaveLength(1);
  });
});

describe('the built proxy (dist/)', () => {
  it("compiles a large schema on its worker thread, as deployed: the worker finds ajv from dist's place", async () => {
    expect(ensureBuiltCli(), 'dist/ is missing: run npm run build').toBe(true);
    const script = `
      import { SchemaCompilers } from ${JSON.stringify(join(ROOT, 'dist/protocol/argument-validators.js'))};
      const properties = { when: { type: 'string', format: 'date-time' } };
      for (let i = 0; i < 400; i++) properties['f' + i] = { type: 'string', description: 'x'.repeat(200) };
      const compilers = new SchemaCompilers();
      const pending = compilers.for([]).validator({ type: 'object', properties, required: ['when'] });
      const validate = await pending;
      console.log(JSON.stringify({ promised: pending instanceof Promise, ok: validate({ when: '2026-11-27T10:00:00Z' }), bad: validate({ when: 'soon' }) }));
      await compilers.close();
    `;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
      cwd: ROOT,
    });
    expect(JSON.parse(stdout)).toEqual({ promised: true, ok: true, bad: false });
  });
});
