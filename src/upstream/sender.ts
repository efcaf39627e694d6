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
}

export class Sender {
  constructor(
    private readonly client: UpstreamClient,
    /** Lower case: the header the proxy's request id goes upstream in. */
    private readonly requestIdHeader: string,
    /** Each call's time to its answer's headers (or failure), per API: the upstream latency metric. */
    private readonly observe?: (apiId: string, seconds: number) => void,
  ) {}

  async send(
    api: ApiRuntime,
    op: OperationBinding,
    parts: UpstreamRequestParts,
    request: RequestContext,
    sending: Sending,
  ): Promise<UpstreamReply> {
    const first = await this.attempt(api, op, parts, request, sending, false);
    if (first.reply.status !== 401 || first.creds.oauthScheme === undefined) return first.reply;
    // The cached token may have been revoked early: fetch a new one, once.
    discard(first.reply);
    return (await this.attempt(api, op, parts, request, sending, true)).reply;
  }

  close(): Promise<void> {
    return this.client.close();
  }

  private async attempt(
    api: ApiRuntime,
    op: OperationBinding,
    parts: UpstreamRequestParts,
    request: RequestContext,
    { timeoutMs, controller }: Sending,
    refresh: boolean,
  ): Promise<{ reply: UpstreamReply; creds: AppliedCredentials }> {
    const creds = await credentials(api, op, refresh);
    if (!api.origin) {
      throw new ProtocolError(
        'upstream_unavailable',
        `No upstream URL is configured for API ${api.info.id}.`,
      );
    }
    const started = performance.now();
    try {
      const reply = await this.client.send({
        origin: api.origin,
        path: upstreamPath(api, parts, creds),
        method: parts.method,
        headers: upstreamHeaders(api, op, parts, creds, request, this.requestIdHeader),
        ...(parts.body ? { body: parts.body.bytes } : {}),
        timeoutMs,
        ...(controller ? { controller } : {}),
        retries: api.settings.retries,
        retryBackoffMs: api.settings.retryBackoffMs,
      });
      return { reply, creds };
    } catch (err) {
      throw callFailure(err, timeoutMs);
    } finally {
      this.observe?.(api.info.id, (performance.now() - started) / 1000);
    }
  }
}

async function credentials(
  api: ApiRuntime,
  op: OperationBinding,
  refresh: boolean,
): Promise<AppliedCredentials> {
  try {
    return await api.credentials.apply(op.security, refresh);
  } catch (err) {
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
}
