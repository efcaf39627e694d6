/**
 * The authentication steps: the bearer token of the request, verified before the body is read
 * (signature, `typ`, `aud`, time, the principal's status). They record nothing but a failure:
 * the jti and the principal's use are recorded by the replay step, after the principal's limits.
 * A client whose failed-authentication budget is used up is refused before its token is looked at,
 * and tokens it sends together cannot all pass that one check (see `charged`).
 */
import { ProtocolError } from '../../errors.js';
import type { Logger } from '../../log.js';
import {
  verifyAgentJwt,
  verifyHostJwt,
  type AgentAuth,
  type HostAuth,
  type HostAuthOptions,
} from '../../protocol/authenticate.js';
import type { ProtocolContext } from '../../protocol/context.js';
import { checkTokenBinding, type PresentedToken, type ProvenRequest } from '../../protocol/dpop.js';
import { bearerToken, jwtType, presentedToken, secretEquals } from '../credentials.js';
import { step, type Exchange, type SharedStep } from '../pipeline.js';
import type { RateLimits } from '../rate-limits.js';

export interface TokenStepOptions {
  readonly ctx: ProtocolContext;
  readonly limits: RateLimits;
  readonly logger: Logger;
}

/** `401 authentication_required`; the server adds the §5.14 / RFC 6750 challenge to every 401. */
function missing(what: string): ProtocolError {
  return new ProtocolError('authentication_required', `Send ${what} as "Authorization: Bearer <token>".`);
}

/**
 * Runs `verify` within the client's failed-authentication budget (§8.13), refused with 429 before
 * it starts once that is used up; a 401 or 403 it throws is charged to the budget and logged
 * (without the token). A verification that finishes synchronously (the hot cache's usual case)
 * stays synchronous, so execution does not wait on the microtask queue, and is charged only if it
 * fails. One that waits (a database read: an unknown `sub`, every host JWT) is charged as it
 * starts and given back if it succeeds: charged only at its end, 500 forged tokens pipelined on one
 * socket all passed the check while the first ones were still being looked up, and all were
 * verified with a budget of 60.
 */
function charged<T>(
  { limits, logger }: TokenStepOptions,
  x: Exchange,
  verify: () => T | Promise<T>,
): T | Promise<T> {
  limits.authFailuresLeft(x.clientIp);
  x.challenge ??= 'protocol';
  // Whether `err` is a failed authentication (logged if so).
  const failedAuth = (err: unknown): boolean => {
    // A 403 here refuses a verified principal for its status (pending, revoked, rejected, expired,
    // claimed): charged too, or a refused key could make the server verify it without end.
    if (!(err instanceof ProtocolError && (err.status === 401 || err.status === 403))) return false;
    logger.warn('authentication failed', {
      request_id: x.requestId,
      route: x.decision.route,
      client_ip: x.clientIp,
      error: err.code,
    });
    return true;
  };
  let result: T | Promise<T>;
  try {
    result = verify();
  } catch (err) {
    if (failedAuth(err)) limits.authFailed(x.clientIp);
    throw err;
  }
  if (!(result instanceof Promise)) return result;
  // Still the turn the budget was checked in: no other request has taken from it since.
  const reserved = limits.authFailed(x.clientIp);
  return result.then(
    (verified) => {
      limits.authSucceeded(x.clientIp, reserved);
      return verified;
    },
    (err: unknown) => {
      if (!failedAuth(err)) limits.authSucceeded(x.clientIp, reserved);
      throw err;
    },
  );
}

function requireToken(x: Exchange, what: string): string {
  const token = bearerToken(x.req);
  if (token === undefined) throw missing(what);
  return token;
}

/** A protocol JWT as presented: Bearer, or DPoP with its proof (§4.4). */
function requirePresented(x: Exchange, what: string): PresentedToken {
  const presented = presentedToken(x.req);
  if (presented === undefined) throw missing(what);
  return presented;
}

/** The request a DPoP proof must name: this method, at the issuer's URL of this path (§4.4). */
function provenRequest(ctx: ProtocolContext, x: Exchange): () => ProvenRequest {
  return () => ({ method: x.req.method ?? '', url: `${ctx.issuer()}${x.url.pathname}` });
}

/** §4.5, then the JWT's binding (§4.4): verified, and proven when it is bound to a key. */
function provenAgent(
  ctx: ProtocolContext,
  x: Exchange,
  presented: PresentedToken,
  audiences: readonly string[],
): AgentAuth | Promise<AgentAuth> {
  const bind = (auth: AgentAuth): AgentAuth | Promise<AgentAuth> => {
    const proof = checkTokenBinding(ctx, auth.claims, presented, provenRequest(ctx, x));
    return proof === undefined ? auth : proof.then((p) => ({ ...auth, proof: p }));
  };
  const auth = verifyAgentJwt(ctx, presented.token, audiences);
  return auth instanceof Promise ? auth.then(bind) : bind(auth);
}

/** §4.5.1, then the JWT's binding (§4.4), as for agents. */
async function provenHost(
  ctx: ProtocolContext,
  x: Exchange,
  presented: PresentedToken,
  auth: HostAuthOptions,
): Promise<HostAuth> {
  const host = await verifyHostJwt(ctx, presented.token, auth);
  await checkTokenBinding(ctx, host.claims, presented, provenRequest(ctx, x));
  return host;
}

function noteAgent(x: Exchange): void {
  if (!x.agent) return;
  x.decision.agent_id = x.agent.agent.id;
  x.decision.host_id = x.agent.host.id;
  x.decision.user_id = x.agent.agent.userId;
}

function noteHost(x: Exchange): void {
  x.decision.host_id = x.host?.host?.id ?? null;
  x.decision.user_id = x.host?.host?.userId ?? null;
}

/** §4.5: an agent JWT addressed to one of `audiences(x)`. */
export function agentToken(
  options: TokenStepOptions,
  audiences: (x: Exchange) => readonly string[] = () => [options.ctx.issuer()],
): SharedStep {
  return step('agent-token', (x) => {
    const auth = charged(options, x, () =>
      provenAgent(options.ctx, x, requirePresented(x, 'an agent JWT'), audiences(x)),
    );
    if (auth instanceof Promise) {
      return auth.then((verified) => {
        x.agent = verified;
        noteAgent(x);
      });
    }
    x.agent = auth;
    noteAgent(x);
    return undefined;
  });
}

/**
 * §4.5.1: a host JWT addressed to the issuer. With `allowUnknown`, a new host is admitted only
 * while its client has budget left for new hosts (`newHosts`), before anything is fetched or checked.
 */
export function hostToken(
  options: TokenStepOptions,
  auth: Omit<HostAuthOptions, 'admitUnknown'> = {},
  newHosts: 'registration' | 'ip' = 'registration',
): SharedStep {
  return step('host-token', async (x) => {
    const admitUnknown = (): void | Promise<void> => options.limits.unknownHostLeft(x.clientIp, newHosts);
    x.host = await charged(options, x, () =>
      provenHost(options.ctx, x, requirePresented(x, 'a host JWT'), { ...auth, admitUnknown }),
    );
    noteHost(x);
  });
}

/**
 * §5.2: listing takes no token, a host JWT (even of a host not registered yet) or an agent JWT;
 * the `typ` header says which, and the chosen verification then checks it for real.
 */
export function optionalListingToken(options: TokenStepOptions): SharedStep {
  return step('optional-token', async (x) => {
    const presented = await charged(options, x, () => presentedToken(x.req));
    if (presented === undefined) return;
    if (jwtType(presented.token) === 'agent+jwt') {
      x.agent = await charged(options, x, () =>
        provenAgent(options.ctx, x, presented, [options.ctx.issuer()]),
      );
      noteAgent(x);
    } else {
      const admitUnknown = (): void | Promise<void> => options.limits.unknownHostLeft(x.clientIp, 'ip');
      x.host = await charged(options, x, () =>
        provenHost(options.ctx, x, presented, { allowUnknown: true, allowPending: true, admitUnknown }),
      );
      noteHost(x);
    }
  });
}

/**
 * An operator secret (admin or introspection token), compared in constant time against every
 * accepted one, so the time taken does not tell which matched.
 */
export function secretToken(
  options: TokenStepOptions,
  what: string,
  accepted: readonly string[],
): SharedStep {
  return step('secret-token', async (x) => {
    x.challenge = 'operator';
    await charged(options, x, () => {
      const token = requireToken(x, `the ${what}`);
      const ok = accepted.reduce((found, secret) => secretEquals(token, secret) || found, false);
      if (!ok) throw new ProtocolError('invalid_token', `The ${what} is not valid.`);
    });
  });
}

/**
 * An agent JWT or a host JWT, told apart by `typ` and then verified for real: for endpoints
 * either principal may call, such as a §10.10.2 notification stream (the agent for its own
 * requests; its host while the agent is still pending and has no usable JWT, as for §5.5 status).
 */
export function agentOrHostToken(
  options: TokenStepOptions,
  audiences: (x: Exchange) => readonly string[],
  hostAuth: HostAuthOptions,
): SharedStep {
  return step('agent-or-host-token', async (x) => {
    const presented = await charged(options, x, () => requirePresented(x, 'an agent or host JWT'));
    if (jwtType(presented.token) === 'agent+jwt') {
      x.agent = await charged(options, x, () => provenAgent(options.ctx, x, presented, audiences(x)));
      noteAgent(x);
    } else {
      x.host = await charged(options, x, () => provenHost(options.ctx, x, presented, hostAuth));
      noteHost(x);
    }
  });
}
