/**
 * The error catalogue: every error code the proxy answers with, its HTTP status and default
 * message, and the one way an error becomes a response body (§5.13: `{ "error", "message" }`
 * plus structured fields). README's error table is checked against this list by a test.
 */

export const ERROR_CATALOGUE = {
  invalid_request: { status: 400, message: 'The request is malformed or missing required fields.' },
  not_found: { status: 404, message: 'No such endpoint.' },
  method_not_allowed: { status: 405, message: 'This endpoint does not accept that method.' },
  payload_too_large: { status: 413, message: 'The request body exceeds the size limit.' },
  capability_not_found: { status: 404, message: 'No capability with that name exists.' },
  unknown_constraint_operator: {
    status: 400,
    message: 'A constraint uses an operator this server does not recognize.',
  },
  unsupported_mode: { status: 400, message: 'This server does not support that agent mode.' },
  unsupported_algorithm: { status: 400, message: 'Only Ed25519 keys are supported.' },
  invalid_capabilities: {
    status: 400,
    message: "One or more requested capability names don't exist or are blocked.",
  },
  authentication_required: { status: 401, message: 'This endpoint requires authentication.' },
  invalid_jwt: { status: 401, message: 'The JWT is invalid, expired, or its signature failed.' },
  invalid_token: { status: 401, message: 'The bearer token is not valid for this endpoint.' },
  unauthorized: { status: 403, message: 'The caller is not authorized for this operation.' },
  agent_revoked: { status: 403, message: 'The agent has been revoked.' },
  agent_expired: { status: 403, message: 'The agent session has expired; reactivate it.' },
  absolute_lifetime_exceeded: {
    status: 403,
    message: "The agent's absolute lifetime has elapsed; register a new agent.",
  },
  agent_pending: { status: 403, message: 'The agent is still pending approval.' },
  agent_rejected: { status: 403, message: 'The agent registration was denied.' },
  agent_claimed: { status: 403, message: 'The agent was claimed by a user and is archived.' },
  host_revoked: { status: 403, message: 'The host has been revoked.' },
  host_pending: { status: 403, message: 'The host is still pending approval.' },
  host_rejected: { status: 403, message: 'The host registration was denied.' },
  capability_not_granted: { status: 403, message: 'The agent does not have this capability.' },
  constraint_violated: { status: 403, message: "The arguments violate the grant's constraints." },
  agent_not_found: { status: 404, message: 'No agent with that id exists.' },
  host_not_found: { status: 404, message: 'No host with that id exists.' },
  approval_not_found: { status: 404, message: 'No pending approval request with that id exists.' },
  passkey_not_found: { status: 404, message: 'The user has no such passkey.' },
  agent_exists: {
    status: 409,
    message: 'An agent with this public key is already registered under this host.',
  },
  already_granted: { status: 409, message: 'All requested capabilities are already granted.' },
  approval_closed: { status: 409, message: 'The approval request was already decided or has expired.' },
  approval_denied: { status: 403, message: 'The person asked to approve this call denied it.' },
  approval_expired: { status: 403, message: 'Nobody approved this call before its approval expired.' },
  rate_limited: { status: 429, message: 'Too many requests; retry later.' },
  execution_not_found: { status: 404, message: 'No async execution with that id exists, or it has expired.' },
  upstream_error: { status: 502, message: 'The upstream API answered with an error.' },
  stream_timeout: { status: 504, message: 'The stream reached its maximum duration; reconnect.' },
  upstream_timeout: { status: 504, message: 'The upstream API did not answer in time.' },
  upstream_unavailable: { status: 502, message: 'The upstream API could not be reached.' },
  internal_error: { status: 500, message: 'The server failed to process the request.' },
  not_ready: { status: 503, message: 'The proxy is not ready to serve requests.' },
  temporarily_unavailable: { status: 503, message: 'The server is overloaded; retry later.' },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

export interface ErrorBody {
  readonly error: ErrorCode;
  readonly message: string;
  readonly [field: string]: unknown;
}

/** An error meant for the client: its code, message and extra fields are safe to reveal. */
export class ProtocolError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly fields: Readonly<Record<string, unknown>>;
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    code: ErrorCode,
    message?: string,
    options: {
      fields?: Record<string, unknown>;
      headers?: Record<string, string>;
      status?: number;
      /** What went wrong underneath (e.g. an upstream transport error): for the log, never the body. */
      cause?: unknown;
    } = {},
  ) {
    const entry = ERROR_CATALOGUE[code];
    super(message ?? entry.message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ProtocolError';
    this.code = code;
    // Only upstream_error overrides its status: an upstream 4xx keeps its meaning for the agent.
    this.status = options.status ?? entry.status;
    this.fields = options.fields ?? {};
    this.headers = options.headers ?? {};
  }

  toBody(): ErrorBody {
    return { ...this.fields, error: this.code, message: this.message };
  }
}

/**
 * The database could not be reached, went away mid-statement, or did not answer in time (issue
 * 13). Here rather than in storage/, which decides when a driver error is one (storage/errors.ts):
 * every layer maps it, this module included.
 */
export class StoreUnavailableError extends Error {
  override readonly name: string = 'StoreUnavailableError';
}

/**
 * A write that still conflicted with concurrent ones after the store's own re-runs (PostgreSQL
 * SERIALIZABLE): rolled back, nothing applied. Served as a StoreUnavailableError (503) to a
 * request; rare work that must not fail for it (drift at a reload or start-up) runs again.
 */
export class StoreConflictError extends StoreUnavailableError {
  override readonly name: string = 'StoreConflictError';
}

/**
 * The database refused a value a request brought: text it cannot store (PostgreSQL's `text` holds
 * no NUL character, SQLSTATE 22021). The request is at fault, not the database: 400, nothing kept.
 */
export class StoreInputError extends Error {
  override readonly name = 'StoreInputError';
}

/** Seconds a client is asked to wait before retrying what the database could not serve. */
export const STORE_RETRY_AFTER_S = 5;

/**
 * Anything that is not a ProtocolError becomes a 500 that reveals nothing of its cause, but a
 * database that could not be reached or did not answer in time (StoreUnavailableError, issue 13):
 * that is `503 temporarily_unavailable` with a Retry-After, since the same request may succeed
 * once the database is back. Its message is fixed: the cause (an address, the driver's words) is
 * for the log only. Every way an error reaches a client (JSON, error page, an event stream's
 * `error` event, a per-call approval's stored error) goes through here.
 */
export function toProtocolError(err: unknown): ProtocolError {
  if (err instanceof ProtocolError) return err;
  if (err instanceof StoreUnavailableError) {
    return new ProtocolError('temporarily_unavailable', 'The database is unavailable; retry shortly.', {
      headers: { 'retry-after': String(STORE_RETRY_AFTER_S) },
      cause: err,
    });
  }
  if (err instanceof StoreInputError) {
    return new ProtocolError(
      'invalid_request',
      'The request holds text that cannot be stored (a NUL character).',
      {
        cause: err,
      },
    );
  }
  return new ProtocolError('internal_error');
}

/**
 * A problem with the operator's input (flags, config, policy, OpenAPI documents). The CLI prints
 * its message without a stack trace and exits with code 2.
 */
export class UserError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UserError';
  }
}
