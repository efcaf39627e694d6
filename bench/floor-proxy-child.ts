/**
 * The benchmark's yardsticks, not a product: the least any agent gateway in Node must do per call.
 * It reads the agent's request, calls the upstream with the same undici pool settings as the proxy
 * and wraps the answer as `{"data": …}`. By MODE, before the call:
 * - `relay`: nothing else (a bare relay);
 * - `verify`: checks the JWT's Ed25519 signature against one fixed key;
 * - `floor` (issue 14): checks the signature, records the JWT's `jti` in a map (a second use is
 *   refused), and parses and checks the JSON body (the capability's name, an integer petId);
 * - `floor-libsodium`: the floor, with the signature checked by libsodium as the proxy checks it
 *   (src/protocol/ed25519.ts) instead of node:crypto: the like-for-like yardstick.
 * No grants, no policy, no activity: whatever these reach bounds the real proxy on this machine.
 *
 * argv: UPSTREAM_URL PUBLIC_KEY_X MODE. Prints its port on stdout.
 */
import { createPublicKey, verify } from 'node:crypto';
import sodium from 'sodium-native';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';

const [upstreamUrl = '', x = '', mode = 'verify'] = process.argv.slice(2);
const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' });
const rawKey = Buffer.from(x, 'base64url');
const checkSignature = mode === 'verify' || mode === 'floor' || mode === 'floor-libsodium';
const floor = mode === 'floor' || mode === 'floor-libsodium';
const validSignature =
  mode === 'floor-libsodium'
    ? (input: Buffer, signature: Buffer) => sodium.crypto_sign_verify_detached(signature, input, rawKey)
    : (input: Buffer, signature: Buffer) => verify(null, input, key, signature);
/** Every jti seen (the benchmark's run is bounded, so the map is too). */
const seen = new Map<string, number>();
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
        !validSignature(
          Buffer.from(token.slice(0, lastDot), 'latin1'),
          Buffer.from(token.slice(lastDot + 1), 'base64url'),
        )
      ) {
        res.writeHead(401).end();
        return;
      }
      if (floor) {
        const payload = JSON.parse(
          Buffer.from(token.slice(token.indexOf('.') + 1, lastDot), 'base64url').toString('utf8'),
        ) as { jti?: unknown; exp?: unknown };
        if (typeof payload.jti !== 'string' || seen.has(payload.jti)) {
          res.writeHead(401).end();
          return;
        }
        seen.set(payload.jti, typeof payload.exp === 'number' ? payload.exp : 0);
      }
      const { capability, arguments: args } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        capability?: unknown;
        arguments?: { petId?: number };
      };
      if (floor && (capability !== 'get_pet' || !Number.isInteger(args?.petId))) {
        res.writeHead(400).end();
        return;
      }
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
