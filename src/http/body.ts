/** Reading request bodies: JSON objects only, size-capped while streaming, clear errors. */
import type { IncomingMessage } from 'node:http';
import { ProtocolError } from '../errors.js';

export async function readJsonObject(
  req: IncomingMessage,
  maxBytes: number,
  options: { optional?: boolean } = {},
): Promise<Record<string, unknown>> {
  const type = req.headers['content-type'];
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    // The declared length is checked up front; this catches chunked bodies that lie or omit it.
    if (size > maxBytes) {
      throw new ProtocolError('payload_too_large', `The request body exceeds the ${maxBytes}-byte limit.`, {
        headers: { connection: 'close' },
      });
    }
    chunks.push(chunk);
  }
  if (size === 0) {
    if (options.optional) return {};
    throw new ProtocolError('invalid_request', 'A JSON request body is required.');
  }
  if (type !== undefined && !/^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i.test(type)) {
    throw new ProtocolError('invalid_request', 'The request body must be application/json.');
  }
  let value: unknown;
  try {
    value = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new ProtocolError('invalid_request', 'The request body is not valid JSON.');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ProtocolError('invalid_request', 'The request body must be a JSON object.');
  }
  return value as Record<string, unknown>;
}
