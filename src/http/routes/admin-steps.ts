/**
 * The steps every operator API route is built from: the admin token (constant-time comparison,
 * failures limited per client IP), then, for a change, the JSON body; and the readers of that body
 * and of the call's origin the routes share.
 */
import { ProtocolError } from '../../errors.js';
import { cleanUserAgent, type DecisionOrigin } from '../../protocol/decision-record.js';
import { need, step, type Exchange, type SharedStep } from '../pipeline.js';
import { jsonBody } from '../steps/body.js';
import { secretToken, type TokenStepOptions } from '../steps/tokens.js';

/** Who the operator is in grants and activity records (unless a `user_id` is given). */
export const ACTOR = 'admin';

type Action = (x: Exchange) => void | Promise<void>;

export interface AdminSteps {
  /** A route that changes nothing: the token step, then `action`. */
  readonly read: (name: string, action: Action) => SharedStep[];
  /** A route that changes something: the token step, the (optional) JSON body, then `action`. */
  readonly change: (name: string, action: Action) => SharedStep[];
  readonly bodyOf: (x: Exchange) => Readonly<Record<string, unknown>>;
  /** A string field of the JSON body, checked (absent: undefined). */
  readonly stringOf: (x: Exchange, key: string, max?: number) => string | undefined;
  /** An operator API decision's record: the admin token, and where the call came from (issue 16). */
  readonly originOf: (x: Exchange) => DecisionOrigin;
}

export function adminSteps(
  options: TokenStepOptions & { readonly adminToken: string; readonly maxBodyBytes: number },
): AdminSteps {
  // One token check for the whole API, then (for changes) the body, then the action.
  const adminToken = secretToken(options, 'admin token', [options.adminToken]);
  const body = jsonBody(options.maxBodyBytes, { optional: true });
  const bodyOf = (x: Exchange): Readonly<Record<string, unknown>> => need(x.body, 'body');
  return {
    read: (name, action) => [adminToken, step(name, action)],
    change: (name, action) => [adminToken, body, step(name, action)],
    bodyOf,
    stringOf: (x, key, max) => optionalString(bodyOf(x), key, max),
    originOf: (x) => ({
      authMethod: 'admin_token',
      ip: x.clientIp,
      userAgent: cleanUserAgent(x.req.headers['user-agent']),
    }),
  };
}

function optionalString(body: Readonly<Record<string, unknown>>, key: string, max = 500): string | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || v === '' || v.length > max) {
    throw new ProtocolError(
      'invalid_request',
      `${key} must be a non-empty string of at most ${max} characters.`,
    );
  }
  return v;
}
