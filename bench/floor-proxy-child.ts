/**
 * The benchmark's yardstick, not a product: the least any agent gateway in Node must do per call.
 * It reads the agent's request, optionally checks the JWT's Ed25519 signature against one fixed
 * key (no claims, no replay cache, no grants, no validation, no activity), calls the upstream with
 * the same undici pool settings as the proxy and wraps the answer as `{"data": …}`. Whatever this
 * reaches is an upper bound for the real proxy on the same machine.
 *
 * argv: UPSTREAM_URL PUBLIC_KEY_X VERIFY(0|1). Prints its port on stdout.
 */
import { createPublicKey, verify } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';

const [upstreamUrl = '', x = '', verifyFlag = '1'] = process.argv.slice(2);
const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' });
const checkSignature = verifyFlag === '1';
const upstream = new Pool(upstreamUrl, { connections: 128 });

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    void (async () => {
      const token = (req.headers.authorization ?? '').slice('Bearer '.length);
      const lastDot = token.lastIndexOf('.');
      if (
        checkSignature &&
        !verify(
          null,
          Buffer.from(token.slice(0, lastDot), 'latin1'),
          key,
          Buffer.from(token.slice(lastDot + 1), 'base64url'),
        )
      ) {
        res.writeHead(401).end();
        return;
      }
      const { arguments: args } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        arguments?: { petId?: number };
      };
      const reply = await upstream.request({
        path: `/v1/pets/${args?.petId ?? 1}`,
        method: 'GET',
        headers: { accept: 'application/json' },
      });
      const data: unknown = await reply.body.json();
      const body = JSON.stringify({ data });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    })().catch(() => res.destroy());
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
