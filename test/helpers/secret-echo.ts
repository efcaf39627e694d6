/**
 * A gateway whose API key an upstream may echo back, for the tests that check it never reaches
 * the agent in any form (issue 10, class 12): the key, an agent holding the echoing operations,
 * and what may show of the key (event-redaction.ts).
 */
import type { ServerResponse } from 'node:http';
import { expect } from 'vitest';
import { startGateway, type Gateway } from './gateway.js';

export const ECHOED_KEY = 'sk-live-9f8e7d6c5b4a3210zyxw';
/** What may show of a secret: at most its first 7 characters (event-redaction.ts). */
export const LEAK_LIMIT = 8;

export type EchoAgent = Awaited<ReturnType<Gateway['p']['activeAgent']>>;

/** The gateway with ECHOED_KEY as its header credential (`api` lines first), and its agent. */
export async function startEchoGateway(api: readonly string[]): Promise<{ gw: Gateway; agent: EchoAgent }> {
  const gw = await startGateway({
    api: [...api, '    credentials:', `      apiKeyHeader: ${JSON.stringify(ECHOED_KEY)}`].join('\n'),
  });
  return { gw, agent: await gw.p.activeAgent(['get_item', 'get_file', 'stream_events']) };
}

/** No run of LEAK_LIMIT characters of `secret` is in `text`. */
export function expectNoRunOf(text: string, secret = ECHOED_KEY): void {
  for (let i = 0; i + LEAK_LIMIT <= secret.length; i++) {
    const piece = secret.slice(i, i + LEAK_LIMIT);
    expect(text, `contains ${piece}`).not.toContain(piece);
  }
}

/** An upstream answer of exactly `body`, with its length. */
export function sendBytes(
  res: ServerResponse,
  status: number,
  headers: Record<string, string>,
  body: Buffer,
): void {
  res.writeHead(status, { 'content-length': String(body.length), ...headers });
  res.end(body);
}
