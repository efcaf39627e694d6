/**
 * What the bundled agent client (`agent-auth-proxy agent …`) trusts from a server, and what it
 * prints of the text a server chose. Hostile "proxies" on 127.0.0.1 (node:http) play the server;
 * a real proxy plays the victim of a server that names it as its issuer.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.js';
import { startProtocol, type TestProtocol } from '../helpers/protocol.js';

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

const ESC = '\u001b';
let dir: string;
const servers: Server[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'aap-agent-trust-'));
});
afterAll(async () => {
  for (const s of servers) await new Promise((resolve) => s.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

async function agent(args: readonly string[], now: () => number = Date.now): Promise<Ran> {
  const ran = { code: 0, stdout: '', stderr: '' };
  const io = { out: (t: string) => void (ran.stdout += t), err: (t: string) => void (ran.stderr += t) };
  ran.code = await runCli(['agent', ...args], io, { now, sleep: () => Promise.resolve() });
  return ran;
}

/** A fresh key file, created by `agent init`. */
async function keyFile(name: string): Promise<string> {
  const file = join(dir, name);
  expect((await agent(['init', '--file', file])).code).toBe(0);
  return file;
}

/** A server on 127.0.0.1: `answer` for every request; its base URL. */
async function serve(
  answer: (req: IncomingMessage, res: ServerResponse, base: string) => void,
): Promise<string> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      answer(req, res, `http://${req.headers.host ?? ''}`);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** A "proxy" whose discovery names itself (with `endpoints`) and answers everything else with `reply`. */
function fakeProxy(
  reply: (res: ServerResponse, base: string) => void,
  endpoints: object = {},
): Promise<string> {
  return serve((req, res, base) => {
    if (req.url === '/.well-known/agent-configuration') send(res, 200, { issuer: base, endpoints });
    else reply(res, base);
  });
}

describe('server text the agent client prints cannot steer the terminal', () => {
  it('register shows the approval’s and the grants’ escape sequences as escapes', async () => {
    const evil = await fakeProxy((res) => {
      send(res, 200, {
        agent_id: 'agt_1',
        host_id: 'hst_1',
        status: 'pending',
        approval: {
          method: 'device_authorization',
          // OSC 0 retitles the terminal; CSI 2J clears it; then a made-up line.
          verification_uri_complete: `${ESC}]0;owned\u0007${ESC}[2J${ESC}[Hhttps://evil.example/x`,
          verification_uri: 'https://evil.example',
          user_code: `AB${ESC}[31mCD`,
          expires_in: 60,
        },
        agent_capability_grants: [{ capability: `x${ESC}[8m`, status: 'pending' }],
      });
    });
    const ran = await agent([
      'register',
      '--file',
      await keyFile('esc.json'),
      '--url',
      evil,
      '--capability',
      'x',
    ]);
    expect(ran.code).toBe(0);
    // Observed before: printed raw.
    expect(ran.stdout).not.toContain(ESC);
    expect(ran.stdout).toContain('\\u001b]0;owned\\u0007');
  });

  it('an error message from the server, on stderr, likewise', async () => {
    const evil = await fakeProxy((res) => {
      send(res, 403, { error: 'denied', message: `${ESC}[2K${ESC}[1Aagent is active` });
    });
    const ran = await agent(['register', '--file', await keyFile('esc-err.json'), '--url', evil]);
    expect(ran.code).toBe(1);
    expect(ran.stderr).not.toContain(ESC);
  });

  it('capabilities likewise, for names and descriptions', async () => {
    const evil = await fakeProxy((res) => {
      send(res, 200, {
        capabilities: [{ name: `n${ESC}[2J`, description: `${ESC}]8;;https://evil/${ESC}\\click` }],
      });
    });
    const ran = await agent(['capabilities', '--file', await keyFile('esc-cap.json'), '--url', evil]);
    expect(ran.code).toBe(0);
    expect(ran.stdout).not.toContain(ESC);
  });
});

describe('agent execute --wait follows a status_url only on the issuer’s origin (§8.12)', () => {
  it('refuses a cross-origin status_url, sending it nothing', async () => {
    let seen: string | undefined;
    const other = await serve((req, res) => {
      seen = req.headers.authorization;
      send(res, 200, { status: 'completed', data: {} });
    });
    const file = await keyFile('status-url.json');
    const registrar = await fakeProxy((res) => {
      send(res, 200, { agent_id: 'agt_1', host_id: 'hst_1', status: 'active' });
    });
    expect((await agent(['register', '--file', file, '--url', registrar])).code).toBe(0);
    const proxy = await fakeProxy((res) => {
      send(res, 202, { status: 'pending', status_url: `${other}/internal/admin?x=1` });
    });
    const ran = await agent(['execute', 'cap', '--file', file, '--url', proxy, '--wait']);
    // Observed before: polled, a fresh agent JWT in its Authorization header.
    expect(ran.code).toBe(1);
    expect(ran.stderr).toMatch(/gave a status_url on another server .* it is not followed/);
    expect(seen).toBeUndefined();
  });
});

describe('discovery must name the server it came from, and endpoints stay on it (§8.18)', () => {
  let victim: TestProtocol;
  beforeAll(async () => {
    victim = await startProtocol({ overrides: { mockUpstream: true } });
  });
  afterAll(() => victim.close());

  it('a server naming another issuer gets no token, so it cannot take the user’s host over there', async () => {
    const now = (): number => victim.clock.now();
    const file = await keyFile('takeover.json');
    const reg = await agent(
      ['register', '--file', file, '--url', victim.proxy.url, '--capability', 'get_pet'],
      now,
    );
    expect(reg.code, reg.stderr).toBe(0);
    const agentId = /registered agent (\S+) /.exec(reg.stdout)?.[1] ?? '';
    const approval = await victim.pendingApproval(agentId);
    const approved = await victim.admin('POST', `/admin/approvals/${approval.id as string}/approve`, {
      user_id: 'alice',
    });
    expect(approved.status).toBe(200);

    // The same key file pointed at another server, whose discovery names the real proxy as issuer.
    let stolen: string | undefined;
    const evil = await serve((req, res, base) => {
      if (req.url === '/.well-known/agent-configuration') {
        send(res, 200, { issuer: victim.issuer, endpoints: { status: `${base}/collect` } });
        return;
      }
      stolen = req.headers.authorization;
      send(res, 200, { agent_id: agentId, status: 'active' });
    });
    const ran = await agent(['status', '--file', file, '--url', evil], now);
    // Observed before: a host JWT with aud = the real proxy went to this server, which used it at
    // the real proxy's POST /host/rotate-key (200) and locked the user out of their host.
    expect(ran.code).toBe(1);
    expect(ran.stderr).toMatch(/names another server as its issuer/);
    expect(stolen).toBeUndefined();
    expect((await agent(['status', '--file', file, '--url', victim.proxy.url], now)).code).toBe(0);
  });

  it('an endpoint on another server is not followed, and gets no token', async () => {
    let stolen: string | undefined;
    const elsewhere = await serve((req, res) => {
      stolen = req.headers.authorization;
      send(res, 200, {});
    });
    const evil = await fakeProxy(
      (res) => {
        send(res, 404, { error: 'not_found', message: 'no' });
      },
      { register: `${elsewhere}/agent/register` },
    );
    const ran = await agent([
      'register',
      '--file',
      await keyFile('endpoint.json'),
      '--url',
      evil,
      '--capability',
      'x',
    ]);
    expect(ran.code).toBe(1);
    expect(ran.stderr).toMatch(/gave its register endpoint on another server/);
    expect(stolen).toBeUndefined();
  });
});
