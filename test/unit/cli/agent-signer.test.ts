/**
 * The agent CLI signs its own JWTs (it imports nothing from src/protocol); these tests hold it to
 * the RFC 7638 thumbprint vector of RFC 8037 and to the proxy's own verifier (§4.2, §4.3).
 */
import { describe, expect, it } from 'vitest';
import { createKeyFile } from '../../../src/cli/agent/key-file.js';
import { agentJwt, hostJwt, thumbprint } from '../../../src/cli/agent/signer.js';
import { decodeJwt, verifyJwt } from '../../../src/protocol/jwt.js';
import { verificationKey } from '../../../src/protocol/keys.js';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const POLICY = { clockSkewSec: 30, maxLifetimeSec: 60 };
const NOW = 1_710_000_000_000;

describe('agent CLI signer', () => {
  it('computes the RFC 7638 thumbprint of RFC 8037 appendix A.3', () => {
    const x = '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo';
    expect(thumbprint({ kty: 'OKP', crv: 'Ed25519', x })).toBe('kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k');
  });

  it('signs host and agent JWTs the proxy verifies, with the claims §4.2 and §4.3 require', () => {
    const file = createKeyFile(join(mkdtempSync(join(tmpdir(), 'aap-signer-')), 'agent.json'), false);
    const key = (x: string) => verificationKey({ kty: 'OKP', crv: 'Ed25519', x });
    const clock = { now: () => NOW };

    const host = hostJwt(file.host_key, 'https://proxy.example', NOW, file.agent_key);
    const hostClaims = verifyJwt(decodeJwt(host, 'host+jwt'), key(file.host_key.x), {
      typ: 'host+jwt',
      audiences: ['https://proxy.example'],
      clock,
      policy: POLICY,
    });
    expect(hostClaims).toMatchObject({
      iss: thumbprint(file.host_key),
      host_public_key: { kty: 'OKP', crv: 'Ed25519', x: file.host_key.x },
      agent_public_key: { kty: 'OKP', crv: 'Ed25519', x: file.agent_key.x },
      exp: NOW / 1000 + 60,
    });
    // The private half never leaves the file.
    expect(host).not.toContain(file.host_key.d);
    expect(JSON.stringify(hostClaims)).not.toContain(file.agent_key.d);

    const location = 'https://proxy.example/capability/execute';
    const agent = agentJwt(file.agent_key, file.host_key, 'agt_1', location, NOW);
    const agentClaims = verifyJwt(decodeJwt(agent, 'agent+jwt'), key(file.agent_key.x), {
      typ: 'agent+jwt',
      audiences: [location],
      clock,
      policy: POLICY,
    });
    expect(agentClaims).toMatchObject({ sub: 'agt_1', iss: thumbprint(file.host_key), aud: location });
    expect(agentJwt(file.agent_key, file.host_key, 'agt_1', location, NOW)).not.toBe(agent);
  });
});

describe('agent CLI boundaries', () => {
  it('is a client: no module of src/cli/agent imports the server side (src/protocol, src/storage)', () => {
    const dir = fileURLToPath(new URL('../../../src/cli/agent/', import.meta.url));
    const files = readdirSync(dir).filter((f) => f.endsWith('.ts'));
    expect(files.length).toBeGreaterThan(5);
    for (const f of files) {
      const imports = [...readFileSync(join(dir, f), 'utf8').matchAll(/from '([^']+)'/g)].map((m) => m[1]);
      for (const spec of imports)
        expect(spec, `${f} imports ${spec}`).not.toMatch(/\/(protocol|storage|http)\//);
    }
  });
});
