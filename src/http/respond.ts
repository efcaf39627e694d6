/** Writing responses. Every JSON response, success or error, goes through `sendJsonText` (most through `sendJson`). */
import type { ServerResponse } from 'node:http';
import { toProtocolError } from '../errors.js';

/** A value that is not a promise: a body is rendered once it is known, never a pending one. */
export type Settled<T> = T extends PromiseLike<unknown> ? never : T;

export function sendJson<T>(
  res: ServerResponse,
  status: number,
  body: Settled<T>,
  headers: Readonly<Record<string, string>> = {},
): void {
  sendJsonText(res, status, JSON.stringify(body), headers);
}

/** `payload`, already JSON text, as sendJson sends a value. */
export function sendJsonText(
  res: ServerResponse,
  status: number,
  payload: string,
  headers: Readonly<Record<string, string>> = {},
): void {
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(payload),
    'x-content-type-options': 'nosniff',
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(payload);
}

/** §5.13: `{ "error", "message" }` plus the error's structured fields. */
export function sendError(res: ServerResponse, err: unknown): void {
  const e = toProtocolError(err);
  sendJson(res, e.status, e.toBody(), e.headers);
}
