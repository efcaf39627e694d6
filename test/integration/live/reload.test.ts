/**
 * Issue 12, live changes: reload() re-reads the policy and the OpenAPI documents and swaps them in
 * without a restart; an invalid new version is refused whole (the last good one serves on, the
 * failure is logged and counted, /readyz stays ready); drift (§2.12) applies on reload as at start.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import { generateTestKey, type TestKey } from '../../helpers/keys.js';
import {
  INTROSPECTION_TOKEN,
  startProtocol,
  writePolicy,
  type TestProtocol,
} from '../../helpers/protocol.js';
import { notesSpec } from '../../helpers/notes-spec.js';
import { PETSTORE } from '../../helpers/proxy.js';

let open: { close(): Promise<void> } | undefined;
afterEach(async () => {
  await open?.close();
  open = undefined;
});

async function reloads(p: TestProtocol): Promise<{ success: number; failure: number }> {
  const text: string = (await p.admin('GET', '/metrics')).body;
  const count = (result: string): number =>
    Number(
      new RegExp(`agent_auth_proxy_config_reloads_total\\{result="${result}"\\} (\\d+)`).exec(text)?.[1],
    );
  return { success: count('success'), failure: count('failure') };
}

/** The agent's first grant as §5.5 status and §5.12 introspection show it. */
async function grantShown(
  p: TestProtocol,
  fx: { host: TestKey; agent: TestKey; agentId: string },
): Promise<{ status: unknown; introspected: unknown }> {
  const status = await p.status(fx.host, fx.agentId);
  const introspected = await p.request('POST', '/agent/introspect', {
    token: INTROSPECTION_TOKEN,
    body: { token: await p.agentToken(fx.agent, fx.agentId) },
  });
  return {
    status: status.body.agent_capability_grants[0],
    introspected: introspected.body.agent_capability_grants[0],
  };
}

describe('reload()', () => {
  it('applies a policy change, and refuses an invalid one keeping the last good', async () => {
    const policy = writePolicy('capabilities:\n  defaults: [list_pets, get_pet]\n');
    const lines: string[] = [];
    const p = await startProtocol({ overrides: { policy }, logSink: (l) => lines.push(l) });
    open = p;
    const fx = await p.activeAgent(['list_pets']);
    expect((await p.execute(fx.agent, fx.agentId, 'list_pets')).status).not.toBe(403);

    writeFileSync(policy, 'capabilities:\n  defaults: [list_pets, get_pet]\n  blocked: [list_pets]\n');
    expect(await p.proxy.reload()).toMatchObject({ ok: true });
    const blocked = await p.execute(fx.agent, fx.agentId, 'list_pets');
    expect(blocked.status).toBe(403);
    expect(blocked.body.message).toMatch(/blocked/);
    // Status and introspection say what execute does (§2.12, §5.5, §5.12): not active.
    expect(await grantShown(p, fx)).toEqual({
      status: { capability: 'list_pets', status: 'denied', reason: expect.stringMatching(/blocked/) },
      introspected: { capability: 'list_pets', status: 'denied' },
    });

    writeFileSync(policy, 'capabilities:\n  blocked: 7\n');
    const refused = await p.proxy.reload();
    expect(refused.ok).toBe(false);
    expect(refused.error).toMatch(/blocked/);
    expect(lines.some((l) => l.includes('reload refused') && l.includes('blocked'))).toBe(true);
    // The last good policy still serves (list_pets blocked), and the proxy is ready.
    expect((await p.execute(fx.agent, fx.agentId, 'list_pets')).status).toBe(403);
    expect((await p.request('GET', '/readyz')).status).toBe(200);
    expect(await reloads(p)).toEqual({ success: 1, failure: 1 });

    // Unblocked again: the grant was kept, and is active once more.
    writeFileSync(policy, 'capabilities:\n  defaults: [list_pets, get_pet]\n');
    expect(await p.proxy.reload()).toMatchObject({ ok: true });
    expect(await grantShown(p, fx)).toMatchObject({
      status: { capability: 'list_pets', status: 'active' },
      introspected: { capability: 'list_pets', status: 'active' },
    });
  });

  it('server constraints a reload adds bind grants made before it, as new ones (§2.13)', async () => {
    const rateLimits = 'rate_limits:\n  unknown_host_registration: null\n';
    const policy = writePolicy(`capabilities:\n  public: ['*']\n${rateLimits}`);
    const p = await startProtocol({ overrides: { policy } });
    open = p;
    const before = await p.activeAgent(['list_pets']);
    expect((await p.execute(before.agent, before.agentId, 'list_pets', { limit: 50 })).status).not.toBe(403);

    writeFileSync(
      policy,
      `capabilities:\n  public: ['*']\n  constraints:\n    list_pets:\n      limit: {max: 5}\n${rateLimits}`,
    );
    expect((await p.proxy.reload()).ok).toBe(true);
    const after = await p.activeAgent(['list_pets']);
    for (const fx of [before, after]) {
      const refused = await p.execute(fx.agent, fx.agentId, 'list_pets', { limit: 50 });
      expect({ status: refused.status, error: refused.body.error }).toEqual({
        status: 403,
        error: 'constraint_violated',
      });
      expect((await p.execute(fx.agent, fx.agentId, 'list_pets', { limit: 5 })).status).not.toBe(403);
      // §5.3: the grant object shows the effective constraints, the ones execute applied.
      expect((await grantShown(p, fx)).status).toMatchObject({ constraints: { limit: { max: 5 } } });
    }
  });

  it('re-reads the whole policy: discovery advertises the modes in force, and new rate limits apply at once', async () => {
    const base = 'capabilities:\n  defaults: [list_pets]\n';
    const policy = writePolicy(
      `${base}modes: [delegated, autonomous]\nrate_limits:\n  unknown_host_registration: null\n`,
    );
    const p = await startProtocol({ overrides: { policy } });
    open = p;
    const fx = await p.activeAgent(['list_pets']);
    const discovered = async (): Promise<unknown> =>
      (await p.request('GET', '/.well-known/agent-configuration')).body.modes;
    expect(await discovered()).toEqual(['delegated', 'autonomous']);

    writeFileSync(
      policy,
      `${base}modes: [delegated]\nrate_limits:\n  unknown_host_registration: null\n  per_capability:\n    list_pets: {per_agent: 2/1h}\n`,
    );
    expect((await p.proxy.reload()).ok).toBe(true);
    // What discovery says is what registration enforces.
    expect(await discovered()).toEqual(['delegated']);
    const autonomous = await p.register(await generateTestKey(), { mode: 'autonomous' });
    expect({ status: autonomous.status, error: autonomous.body.error }).toEqual({
      status: 400,
      error: 'unsupported_mode',
    });
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await p.execute(fx.agent, fx.agentId, 'list_pets')).status);
    expect(statuses[2]).toBe(429);
    expect(statuses.slice(0, 2)).not.toContain(429);
  });

  it('a JWT used before a reload that raises clock_skew is still refused (§4.6): jtis are kept for the largest skew', async () => {
    const policy = (skew: string): string =>
      `capabilities:\n  defaults: [list_pets]\nlifetimes:\n  clock_skew: ${skew}\nrate_limits:\n  unknown_host_registration: null\n`;
    const file = writePolicy(policy('0s'));
    const p = await startProtocol({ overrides: { policy: file } });
    open = p;
    const { agent, agentId } = await p.activeAgent(['list_pets']);
    const token = await p.agentToken(agent, agentId); // exp: now + 60 s
    expect((await p.request('GET', '/capability/list', { token })).status).toBe(200);
    p.clock.advance(61_000);
    writeFileSync(file, policy('30s'));
    expect((await p.proxy.reload()).ok).toBe(true);
    // Acceptable again until exp + 30 s, and so still used up.
    const replay = await p.request('GET', '/capability/list', { token });
    expect({ status: replay.status, error: replay.body.error }).toEqual({
      status: 401,
      error: 'invalid_jwt',
    });
  });

  it('re-reads approval.warn_names: the device page warns by the policy in force', async () => {
    const policy = writePolicy('rate_limits:\n  unknown_host_registration: null\n');
    const p = await startProtocol({ overrides: { policy } });
    open = p;
    const pageFor = async (): Promise<string> => {
      const reg = await p.register(await generateTestKey(), {
        name: 'Acme Pets helper',
        capabilities: ['list_pets'],
      });
      return (await fetch(`${p.proxy.url}/device?code=${reg.body.approval.user_code as string}`)).text();
    };
    expect(await pageFor()).not.toContain('“Acme Pets”');
    writeFileSync(
      policy,
      'rate_limits:\n  unknown_host_registration: null\napproval:\n  warn_names: [Acme Pets]\n',
    );
    expect(await p.proxy.reload()).toMatchObject({ ok: true });
    expect(await pageFor()).toContain('The agent name uses the name “Acme Pets”.');
  });

  it('refuses an invalid document, then applies drift when the document changes', async () => {
    const spec = notesSpec();
    const g: Gateway = await startGateway({ spec });
    open = g;
    const fx = await g.p.activeAgent(['get_note', 'list_notes']);
    expect((await g.p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' })).status).toBe(200);

    writeFileSync(spec, 'openapi: 3.0.3\npaths: [not, a, map]\n');
    expect((await g.p.proxy.reload()).ok).toBe(false);
    expect((await g.p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' })).status).toBe(200);
    expect((await g.p.request('GET', '/readyz')).status).toBe(200);

    writeFileSync(spec, readFile(notesSpec({ withList: false, noteInput: '{ type: integer }' })));
    expect(await g.p.proxy.reload()).toMatchObject({ ok: true, capabilities: 1 });
    const changed = await g.p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' });
    expect(changed.status).toBe(403);
    expect(changed.body.message).toMatch(/re-approval is needed/);
    const removed = await g.p.execute(fx.agent, fx.agentId, 'list_notes');
    expect(removed.status).toBe(403);
    expect(removed.body.message).toMatch(/removed/);
    const list = await g.p.request('GET', '/capability/list');
    expect(list.body.capabilities.map((c: { name: string }) => c.name)).toEqual(['get_note']);
    // /readyz counts the catalog in force, not the one the proxy started with.
    expect((await g.p.request('GET', '/readyz')).body).toEqual({ status: 'ready', capabilities: 1 });
  });

  it('the built-in mock upstream answers for the reloaded document: a new operation works at once', async () => {
    const spec = notesSpec({ withList: false });
    const p = await startProtocol({ overrides: { specs: [spec], mockUpstream: true } });
    open = p;
    writeFileSync(spec, readFile(notesSpec()));
    expect(await p.proxy.reload()).toMatchObject({ ok: true, capabilities: 2 });
    const fx = await p.activeAgent(['list_notes']);
    const listed = await p.execute(fx.agent, fx.agentId, 'list_notes');
    // The mock's sample for `{ type: array }`; before, it still had only get_note's route: 404.
    expect(listed.status).toBe(200);
    expect(listed.body).toEqual({ data: [null] });
  });

  it('keeps the compiled validator of a schema the reload did not change, and compiles a changed one', async () => {
    const spec = notesSpec();
    const g: Gateway = await startGateway({ spec });
    open = g;
    const compiled = async (): Promise<number> =>
      Number(
        /agent_auth_proxy_validator_compile_duration_seconds_count (\d+)/.exec(
          (await g.p.admin('GET', '/metrics')).body,
        )?.[1],
      );
    const fx = await g.p.activeAgent(['get_note', 'list_notes']);
    expect((await g.p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' })).status).toBe(200);
    expect((await g.p.execute(fx.agent, fx.agentId, 'list_notes')).status).toBe(200);
    const before = await compiled();
    expect(before).toBeGreaterThanOrEqual(2);

    // The same document again: both validators are the ones already compiled.
    expect((await g.p.proxy.reload()).ok).toBe(true);
    expect((await g.p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' })).status).toBe(200);
    expect((await g.p.execute(fx.agent, fx.agentId, 'list_notes')).status).toBe(200);
    expect(await compiled()).toBe(before);

    // list_notes's arguments change (a query parameter more): drift suspends its grant (§2.12)
    // until approved again; it alone is compiled again, once (by the warm-up that starts with the
    // reload, or at its first call).
    writeFileSync(
      spec,
      readFile(spec).replace(
        'operationId: listNotes',
        'operationId: listNotes\n      parameters: [{ name: q, in: query, schema: { type: string } }]',
      ),
    );
    expect((await g.p.proxy.reload()).ok).toBe(true);
    expect((await g.p.execute(fx.agent, fx.agentId, 'get_note', { id: 'a' })).status).toBe(200);
    expect((await g.p.execute(fx.agent, fx.agentId, 'list_notes', { q: 'x' })).status).toBe(403);
    const approval = (await g.p.pendingApproval(fx.agentId)) as { id: string };
    expect((await g.p.admin('POST', `/admin/approvals/${approval.id}/approve`, {})).status).toBe(200);
    expect((await g.p.execute(fx.agent, fx.agentId, 'list_notes', { q: 'x' })).status).toBe(200);
    expect(await compiled()).toBe(before + 1);
  });

  it('lets the replaced catalog and policy go, in its own collection, before it returns', async () => {
    const spec = notesSpec();
    const p = await startProtocol({ overrides: { specs: [spec] } });
    open = p;
    // WeakRefs only: nothing in this test may keep the documents alive itself. No collection by
    // the test either: a reload of a changed document collects once it has swapped, and nothing of
    // the reload may still hold the old catalog then (a rollback's copy did, which left it to a
    // later collection while the next reload parsed: a peak 20 MiB higher for Microsoft Graph).
    // A changed document each time: an unchanged one keeps its catalog (the tests below).
    for (const summary of ['Get one note', 'Get a single note']) {
      const replaced = { catalog: new WeakRef(p.proxy.catalog), policy: new WeakRef(p.proxy.policy) };
      writeFileSync(spec, readFile(notesSpec({ summary })));
      expect((await p.proxy.reload()).ok).toBe(true);
      expect(replaced.catalog.deref(), 'the replaced catalog outlived the reload').toBeUndefined();
      expect(replaced.policy.deref(), 'the replaced policy outlived the reload').toBeUndefined();
    }
    expect(p.proxy.catalog.capabilities.length).toBeGreaterThan(0);
  });
});

describe('reload() of documents that did not change', () => {
  /** The `documents` field of each `reloaded` log line so far. */
  const reloadedDocuments = (lines: readonly string[]): unknown[] =>
    lines
      .map((line) => JSON.parse(line) as { msg?: string; documents?: unknown })
      .filter((entry) => entry.msg === 'reloaded')
      .map((entry) => entry.documents);

  /** A proxy of the notes document and a policy file, with the log lines it writes. */
  async function started(policyText: string) {
    const spec = notesSpec();
    const policy = writePolicy(policyText);
    const lines: string[] = [];
    const p = await startProtocol({ overrides: { specs: [spec], policy }, logSink: (l) => lines.push(l) });
    open = p;
    return { spec, policy, lines, p };
  }

  it('keeps the catalog in force, and applies the policy; a changed document is loaded again', async () => {
    const { spec, policy, lines, p } = await started('capabilities:\n  defaults: [list_notes, get_note]\n');
    const fx = await p.activeAgent(['list_notes']);
    const catalog = p.proxy.catalog;

    writeFileSync(policy, 'capabilities:\n  defaults: [list_notes, get_note]\n  blocked: [list_notes]\n');
    expect(await p.proxy.reload()).toMatchObject({ ok: true, capabilities: 2 });
    expect(p.proxy.catalog).toBe(catalog);
    expect((await p.execute(fx.agent, fx.agentId, 'list_notes')).body.message).toMatch(/blocked/);

    writeFileSync(spec, readFile(notesSpec({ summary: 'Get one note' })));
    expect((await p.proxy.reload()).ok).toBe(true);
    expect(p.proxy.catalog).not.toBe(catalog);
    expect(p.proxy.catalog.get('get_note')?.description).toBe('Get one note');
    expect(reloadedDocuments(lines)).toEqual(['unchanged', 'loaded']);
  });

  it('a capability a reload removes: execute refuses its grant, status and introspection show it denied (§2.12)', async () => {
    // The policy names no capability, so it stays valid without list_notes.
    const { spec, p } = await started("capabilities:\n  public: ['*']\n");
    const fx = await p.activeAgent(['list_notes']);
    writeFileSync(spec, readFile(notesSpec({ withList: false })));
    expect((await p.proxy.reload()).ok).toBe(true);
    expect(p.proxy.catalog.get('list_notes')).toBeUndefined();
    const refused = await p.execute(fx.agent, fx.agentId, 'list_notes');
    expect({ status: refused.status, error: refused.body.error }).toEqual({
      status: 403,
      error: 'capability_not_granted',
    });
    expect(await grantShown(p, fx)).toEqual({
      status: { capability: 'list_notes', status: 'denied', reason: expect.stringMatching(/removed/) },
      introspected: { capability: 'list_notes', status: 'denied' },
    });
  });

  it('compares with the documents in force, not with those of a refused reload', async () => {
    const { spec, policy, lines, p } = await started('capabilities:\n  defaults: [get_note]\n');
    const catalog = p.proxy.catalog;
    const original = readFile(spec);

    // A new document that loads, refused for its policy: the first catalog stays in force.
    writeFileSync(spec, readFile(notesSpec({ summary: 'Get one note' })));
    writeFileSync(policy, 'capabilities:\n  blocked: 7\n');
    expect((await p.proxy.reload()).ok).toBe(false);
    expect(p.proxy.catalog).toBe(catalog);

    // Back to the first document: unchanged against the one in force, so kept.
    writeFileSync(spec, original);
    writeFileSync(policy, 'capabilities:\n  defaults: [get_note]\n');
    expect((await p.proxy.reload()).ok).toBe(true);
    expect(p.proxy.catalog).toBe(catalog);
    // And the refused reload's document, now with a valid policy, is loaded, not taken for the same.
    writeFileSync(spec, readFile(notesSpec({ summary: 'Get one note' })));
    expect((await p.proxy.reload()).ok).toBe(true);
    expect(p.proxy.catalog.get('get_note')?.description).toBe('Get one note');
    expect(reloadedDocuments(lines)).toEqual(['unchanged', 'loaded']);
  });

  it('keeps the served catalog, pins and proxy headers applied, until they change', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'aap-reload-pins-')), 'proxy.yaml');
    const spec = notesSpec();
    const config = (pin: boolean): string =>
      [
        'apis:',
        `  - spec: ${JSON.stringify(spec)}`,
        '    upstream: http://127.0.0.1:9',
        '    headers:',
        '      X-Tenant: acme',
        ...(pin ? ['    operations:', '      get_note:', '        pin:', '          fields: title'] : []),
      ].join('\n');
    writeFileSync(file, config(true));
    const lines: string[] = [];
    const p = await startProtocol({ overrides: { config: file }, logSink: (l) => lines.push(l) });
    open = p;
    const inputOf = (): unknown => p.proxy.catalog.get('get_note')?.argumentsSchema.properties;
    const catalog = p.proxy.catalog;
    expect(inputOf()).toHaveProperty('id');
    expect(inputOf()).not.toHaveProperty('fields');

    // Nothing that shapes the catalog changed: the very catalog in force stays.
    expect((await p.proxy.reload()).ok).toBe(true);
    expect(p.proxy.catalog).toBe(catalog);
    // The pin goes: the same documents, served without it.
    writeFileSync(file, config(false));
    expect((await p.proxy.reload()).ok).toBe(true);
    expect(p.proxy.catalog).not.toBe(catalog);
    expect(inputOf()).toHaveProperty('fields');
    expect(reloadedDocuments(lines)).toEqual(['unchanged', 'unchanged']);
  });
});

describe('reload() of the config file', () => {
  it("re-reads the config's API list", async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'aap-reload-config-')), 'proxy.yaml');
    const config = (spec: string): string =>
      `apis:\n  - spec: ${JSON.stringify(spec)}\n    upstream: http://127.0.0.1:9\n`;
    writeFileSync(file, config(notesSpec()));
    const p = await startProtocol({ overrides: { config: file } });
    open = p;
    const names = async (): Promise<string[]> => {
      const listed = (await p.request('GET', '/capability/list')).body as {
        capabilities: { name: string }[];
      };
      return listed.capabilities.map((c) => c.name);
    };
    expect(await names()).toEqual(['get_note', 'list_notes']);
    writeFileSync(file, config(PETSTORE));
    expect((await p.proxy.reload()).ok).toBe(true);
    expect(await names()).toContain('list_pets');
    expect(await names()).not.toContain('get_note');
  });

  it('names the changed settings it did not apply (they take a restart), never their values', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'aap-reload-restart-'));
    const file = join(dir, 'proxy.yaml');
    const hash = 'scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    const config = (changed: boolean): string =>
      [
        `apis:\n  - spec: ${JSON.stringify(PETSTORE)}\n    upstream: http://127.0.0.1:9`,
        `provider: {name: ${changed ? 'after' : 'before'}}`,
        `server: {max_body_bytes: ${changed ? 1024 : 1048576}}`,
        `sign_in:\n  fresh_auth: ${changed ? '1m' : '5m'}\n  local:\n    users:\n      - {user_id: alice, password_hash: "${hash}"}`,
        `jwks: {timeout: 5s}\nnotifications:\n  webhook: {url: "https://hooks.example/x", secret: "${changed ? 'second' : 'first'}-webhook-secret-0123456789"}`,
        '',
      ].join('\n');
    writeFileSync(file, config(false));
    const lines: string[] = [];
    const p = await startProtocol({ overrides: { config: file }, logSink: (l) => lines.push(l) });
    open = p;
    // Read again unchanged: nothing to restart for.
    expect(await p.proxy.reload()).toEqual({ ok: true, capabilities: expect.any(Number) });

    writeFileSync(file, config(true));
    const result = await p.proxy.reload();
    expect(result).toMatchObject({ ok: true });
    expect(result.restartNeeded).toEqual([
      'server.max_body_bytes',
      'provider.name',
      'sign_in',
      'notifications',
    ]);
    const warned = lines.find((l) => l.includes('take a restart'));
    expect(warned).toContain('provider.name');
    expect(lines.join('\n')).not.toContain('second-webhook-secret');
    // What the process started with serves on.
    const discovery = await p.request('GET', '/.well-known/agent-configuration');
    expect(discovery.body.provider_name).toBe('before');
  });
});

function readFile(path: string): string {
  return readFileSync(path, 'utf8');
}
