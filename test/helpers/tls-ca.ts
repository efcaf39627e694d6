/**
 * A throw-away certificate authority and a server certificate for `localhost` / 127.0.0.1,
 * made with the openssl CLI (node:crypto cannot issue X.509 certificates) in a temp directory.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestPki {
  readonly dir: string;
  readonly caFile: string;
  readonly caPem: string;
  readonly key: string;
  readonly cert: string;
  cleanup(): void;
}

export function createTestPki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'jwks-pki-'));
  const at = (name: string): string => join(dir, name);
  const openssl = (...args: string[]): void => {
    execFileSync('openssl', args, { stdio: 'pipe' });
  };
  openssl(
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-days',
    '2',
    '-subj',
    '/CN=agent-auth-proxy test CA',
    '-keyout',
    at('ca.key'),
    '-out',
    at('ca.pem'),
  );
  openssl(
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-subj',
    '/CN=localhost',
    '-keyout',
    at('server.key'),
    '-out',
    at('server.csr'),
  );
  writeFileSync(at('ext.cnf'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  openssl(
    'x509',
    '-req',
    '-in',
    at('server.csr'),
    '-CA',
    at('ca.pem'),
    '-CAkey',
    at('ca.key'),
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    at('ext.cnf'),
    '-out',
    at('server.pem'),
  );
  return {
    dir,
    caFile: at('ca.pem'),
    caPem: readFileSync(at('ca.pem'), 'utf8'),
    key: readFileSync(at('server.key'), 'utf8'),
    cert: readFileSync(at('server.pem'), 'utf8'),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
