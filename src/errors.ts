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
  internal_error: { status: 500, message: 'The server failed to process the request.' },
  not_ready: { status: 503, message: 'The proxy is not ready to serve requests.' },
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
    options: { fields?: Record<string, unknown>; headers?: Record<string, string> } = {},
  ) {
    const entry = ERROR_CATALOGUE[code];
    super(message ?? entry.message);
    this.name = 'ProtocolError';
    this.code = code;
    this.status = entry.status;
    this.fields = options.fields ?? {};
    this.headers = options.headers ?? {};
  }

  toBody(): ErrorBody {
    return { ...this.fields, error: this.code, message: this.message };
  }
}

/** Anything that is not a ProtocolError becomes a 500 that reveals nothing of its cause. */
export function toProtocolError(err: unknown): ProtocolError {
  return err instanceof ProtocolError ? err : new ProtocolError('internal_error');
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
