/**
 * §5.2 `GET /capability/list` and §5.2.1 `GET /capability/describe`, unauthenticated mode:
 * every capability of the catalog is listed.
 */
import { ProtocolError } from '../../errors.js';
import { matchesQuery, paginate, type Catalog } from '../../openapi/catalog.js';
import { sendJson } from '../respond.js';
import type { Router } from '../router.js';

export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 200;
const MAX_QUERY_LENGTH = 256;

/** §10.6: capability responses SHOULD carry a max-age of 300; they depend on who asks. */
const CACHE_HEADERS = { 'cache-control': 'max-age=300', vary: 'authorization' };

export function capabilityRoutes(router: Router, catalog: Catalog): void {
  router.add('GET', '/capability/list', ({ res, url }) => {
    const query = single(url, 'query') ?? '';
    if (query.length > MAX_QUERY_LENGTH) {
      throw new ProtocolError('invalid_request', `query must be at most ${MAX_QUERY_LENGTH} characters.`);
    }
    const limit = parseLimit(single(url, 'limit'));
    const after = decodeCursor(single(url, 'cursor'));
    const matching = query
      ? catalog.capabilities.filter((c) => matchesQuery(c, query))
      : catalog.capabilities;
    const page = paginate(matching, after, limit);
    sendJson(
      res,
      200,
      {
        capabilities: page.items.map((c) => ({ name: c.name, description: c.description })),
        next_cursor: page.after === null ? null : encodeCursor(page.after),
        has_more: page.after !== null,
      },
      CACHE_HEADERS,
    );
  });

  router.add('GET', '/capability/describe', ({ res, url }) => {
    const name = single(url, 'name');
    if (!name) throw new ProtocolError('invalid_request', 'The name query parameter is required.');
    const capability = catalog.get(name);
    // §5.2.1: an unknown name MUST be 404 capability_not_found.
    if (!capability) throw new ProtocolError('capability_not_found', `No capability named "${name}".`);
    sendJson(
      res,
      200,
      {
        name: capability.name,
        description: capability.description,
        ...(capability.input ? { input: capability.input } : {}),
        ...(capability.output ? { output: capability.output } : {}),
      },
      CACHE_HEADERS,
    );
  });
}

/** A query parameter given at most once; repeating it is ambiguous, so it is an error. */
function single(url: URL, name: string): string | undefined {
  const values = url.searchParams.getAll(name);
  if (values.length > 1)
    throw new ProtocolError('invalid_request', `The ${name} query parameter was given more than once.`);
  return values[0];
}

function parseLimit(raw: string | undefined): number {
  if (raw === undefined || raw === '') return DEFAULT_LIMIT;
  if (!/^\d{1,6}$/.test(raw) || Number(raw) < 1) {
    throw new ProtocolError('invalid_request', `limit must be a whole number from 1 to ${MAX_LIMIT}.`);
  }
  return Math.min(Number(raw), MAX_LIMIT);
}

/** Cursors are opaque to clients (§5.2): base64url of a small versioned JSON object. */
export function encodeCursor(after: string): string {
  return Buffer.from(JSON.stringify({ v: 1, after })).toString('base64url');
}

function decodeCursor(raw: string | undefined): string | undefined {
  if (raw === undefined || raw === '') return undefined;
  try {
    const value: unknown = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    if (
      typeof value === 'object' &&
      value !== null &&
      'v' in value &&
      value.v === 1 &&
      'after' in value &&
      typeof value.after === 'string'
    ) {
      return value.after;
    }
  } catch {
    // fall through: not our cursor
  }
  throw new ProtocolError('invalid_request', 'cursor is not a cursor this server issued.');
}
