/**
 * Sends one built request to its API: the operation's credentials applied (an OAuth token
 * refreshed once when the upstream answers 401), the proxy's headers added (outgoing.ts), and a
 * transport failure turned into the agent's error.
 */
import { ProtocolError } from '../errors.js';
import type { OperationBinding } from '../openapi/types.js';
import { callFailure, discard } from './answers.js';
import type { Cancellation } from './cancellation.js';
import type { UpstreamClient, UpstreamReply } from './client.js';
import type { AppliedCredentials } from './credentials.js';
import { TokenError } from './oauth.js';
import { upstreamHeaders, upstreamPath, type RequestContext } from './outgoing.js';
import type { UpstreamRequestParts } from './request-parts.js';
import type { ApiRuntime } from './runtime.js';

export interface Sending {
  readonly timeoutMs: number;
  readonly controller?: Cancellation;
  /** true: no retry of an idempotent method after a failure (a person approved one call). */
  readonly once?: boolean;
  /**
   * Runs after an OAuth token is fetched and after a retry's backoff, before the call goes: both
   * take time, and what allowed the call may have been revoked meanwhile. Throws to send nothing.
   */
  readonly beforeSend?: () => Promise<void> | undefined;
}

export class Sender {
  constructor(
    private readonly client: UpstreamClient,
    /** Lower case: the header the proxy's request id goes upstream in. */
    private readonly requestIdHeader: string,
    /** Each call's time to its answer's headers (or failure), per API: the upstream latency metric. */
    private readonly observe?: (apiId: string, seconds: number) => void,
  ) {}

  send(
    api: ApiRuntime,
    op: OperationBinding,
    parts: UpstreamRequestParts,
    request: RequestContext,
    sending: Sending,
  ): Promise<UpstreamReply> {
    const applied = credentials(api, op, false);
    // Credentials without an OAuth token are at hand at once, and there is no token to refresh on
    // a 401: the call is the whole of it, with no async layer around it.
    if (!(applied instanceof Promise)) return this.call(api, op, parts, request, sending, applied);
    return this.withToken(api, op, parts, request, sending, applied);
  }

  /** A call with an OAuth token, fetched anew once when the upstream answers 401. */
  private async withToken(
    api: ApiRuntime,
    op: OperationBinding,
    parts: UpstreamRequestParts,
    request: RequestContext,
    sending: Sending,
    applied: Promise<AppliedCredentials>,
  ): Promise<UpstreamReply> {
    const creds = await applied;
    await sending.beforeSend?.();
    const first = await this.call(api, op, parts, request, sending, creds);
    if (first.status !== 401 || creds.oauthScheme === undefined) return first;
    // The cached token may have been revoked early: fetch a new one, once.
    discard(first);
    const fresh = await credentials(api, op, true);
    await sending.beforeSend?.();
    return this.call(api, op, parts, request, sending, fresh);
  }

  /** One request with these credentials; a transport failure becomes the agent's error. */
  private call(
    api: ApiRuntime,
    op: OperationBinding,
    parts: UpstreamRequestParts,
    request: RequestContext,
    { timeoutMs, controller, once, beforeSend }: Sending,
    creds: AppliedCredentials,
  ): Promise<UpstreamReply> {
    if (!api.origin) {
      throw new ProtocolError(
        'upstream_unavailable',
        `No upstream URL is configured for API ${api.info.id}.`,
      );
    }
    const started = performance.now();
    const observed = (): void => this.observe?.(api.info.id, (performance.now() - started) / 1000);
    return this.client
      .send({
        origin: api.origin,
        path: upstreamPath(api, parts, creds),
        method: parts.method,
        headers: upstreamHeaders(api, op, parts, creds, request, this.requestIdHeader),
        body: parts.body?.bytes,
        timeoutMs,
        controller,
        retries: once === true ? 0 : api.settings.retries,
        retryBackoffMs: api.settings.retryBackoffMs,
        ...(beforeSend ? { beforeRetry: beforeSend } : {}),
      })
      .then(
        (reply) => {
          observed();
          return reply;
        },
        (err: unknown) => {
          observed();
          throw callFailure(err, timeoutMs);
        },
      );
  }
}

/** The operation's credentials; an OAuth token that cannot be had is the agent's 503. */
function credentials(
  api: ApiRuntime,
  op: OperationBinding,
  refresh: boolean,
): AppliedCredentials | Promise<AppliedCredentials> {
  const applied = api.credentials.apply(op.security, refresh);
  return applied instanceof Promise ? applied.catch(tokenFailure) : applied;
}

function tokenFailure(err: unknown): never {
  if (err instanceof TokenError) {
    // The reason names the token endpoint's behaviour, never a secret.
    throw new ProtocolError(
      'upstream_unavailable',
      `Could not obtain the service's OAuth token: ${err.message}.`,
      { cause: err },
    );
  }
  throw err;
}
