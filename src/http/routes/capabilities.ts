/**
 * §5.2 `GET /capability/list` and §5.2.1 `GET /capability/describe` in their three modes:
 * without authentication only the policy's public capabilities; with a host JWT every capability
 * the host could request; with an agent JWT every capability plus its `grant_status`. Blocked
 * capabilities are never shown.
 */
import { ProtocolError } from '../../errors.js';
import { capabilityVersion } from '../../protocol/capability-version.js';
import { advertisedSchemas } from '../../openapi/advertised-schemas.js';
import { matchesQuery, paginate } from '../../openapi/catalog.js';
import type { Capability } from '../../openapi/types.js';
import type { ProtocolContext } from '../../protocol/context.js';
import { cachedGrants, loadGrants } from '../../protocol/grants.js';
import { isGrantEffective } from '../../protocol/lifecycle.js';
import { step, type Exchange } from '../pipeline.js';
import type { RateLimits } from '../rate-limits.js';
import { sendJson } from '../respond.js';
import type { Router } from '../router.js';
import { principalLimits } from '../steps/limits.js';
import { replayRecord } from '../steps/replay.js';
import { optionalListingToken, type TokenStepOptions } from '../steps/tokens.js';

export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 200;
const MAX_QUERY_LENGTH = 256;

export interface CapabilityRouteOptions extends TokenStepOptions {
  readonly ctx: ProtocolContext;
  readonly limits: RateLimits;
}

/** Who is looking, from the token the earlier steps verified (§5.2's three modes). */
interface Viewer {
  readonly visible: (c: Capability) => boolean;
  /** Present in agent-JWT mode. */
  readonly granted?: (name: string) => boolean;
  readonly cacheControl: string;
}

async function viewerOf(ctx: ProtocolContext, x: Exchange): Promise<Viewer> {
  const notBlocked = (c: Capability): boolean => !ctx.policy.blocked.has(c.name);
  if (x.agent) {
    const now = ctx.clock.now();
    const id = x.agent.agent.id;
    const granted = new Set(
      (cachedGrants(ctx, id) ?? (await loadGrants(ctx, id)))
        .filter((g) => isGrantEffective(g, now))
        .map((g) => g.capability),
    );
    // Not §10.6's 300 s: grant_status changes as soon as a person decides, and an agent that
    // polls after approving must not be served the answer from before.
    return { visible: notBlocked, granted: (n) => granted.has(n), cacheControl: 'private, no-store' };
  }
  // A host JWT, possibly from a host not registered yet: it lists before registering (§5.2).
  if (x.host) return { visible: notBlocked, cacheControl: 'private, max-age=300' };
  // §10.6: capability listings SHOULD be cacheable for 300 s.
  return {
    visible: (c) => notBlocked(c) && ctx.policy.public.has(c.name),
    cacheControl: 'public, max-age=300',
  };
}

export function capabilityRoutes(router: Router, options: CapabilityRouteOptions): void {
  // The catalog is read per request from the context: a reload swaps it there (reload.ts).
  const { ctx, limits } = options;
  const viewing = [optionalListingToken(options), principalLimits(limits), replayRecord(ctx)];

  router.add('GET', '/capability/list', [
    ...viewing,
    step('list', async (x) => {
      const { res, url } = x;
      const query = single(url, 'query') ?? '';
      if (query.length > MAX_QUERY_LENGTH) {
        throw new ProtocolError('invalid_request', `query must be at most ${MAX_QUERY_LENGTH} characters.`);
      }
      const limit = parseLimit(single(url, 'limit'));
      const after = decodeCursor(single(url, 'cursor'));
      const who = await viewerOf(ctx, x);
      const matching = ctx.catalog.capabilities.filter(
        (c) => who.visible(c) && (!query || matchesQuery(c, query)),
      );
      const page = paginate(matching, after, limit);
      sendJson(
        res,
        200,
        {
          capabilities: page.items.map((c) => ({
            name: c.name,
            description: c.description,
            // §2.12: the content hash an approval covers; it changes exactly when they do.
            version: capabilityVersion(c),
            ...(who.granted ? { grant_status: who.granted(c.name) ? 'granted' : 'not_granted' } : {}),
          })),
          next_cursor: page.after === null ? null : encodeCursor(page.after),
          has_more: page.after !== null,
        },
        { 'cache-control': who.cacheControl, vary: 'authorization' },
      );
    }),
  ]);

  router.add('GET', '/capability/describe', [
    ...viewing,
    step('describe', async (x) => {
      const name = single(x.url, 'name');
      if (!name) throw new ProtocolError('invalid_request', 'The name query parameter is required.');
      const who = await viewerOf(ctx, x);
      const capability = ctx.catalog.get(name);
      // §5.2.1: an unknown name MUST be 404; one the caller may not see is indistinguishable.
      if (!capability || !who.visible(capability)) {
        throw new ProtocolError('capability_not_found', `No capability named "${name}".`);
      }
      sendJson(
        x.res,
        200,
        {
          name: capability.name,
          description: capability.description,
          version: capabilityVersion(capability),
          // Within 256 KiB, the farthest components summarized when the whole would not fit.
          ...advertisedSchemas(capability),
          ...(who.granted ? { grant_status: who.granted(capability.name) ? 'granted' : 'not_granted' } : {}),
        },
        { 'cache-control': who.cacheControl, vary: 'authorization' },
      );
    }),
  ]);
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
