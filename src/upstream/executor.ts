/**
 * Calls the upstream operation behind a capability for an authorized agent and turns the answer
 * into a §5.11 outcome (data, stream, async or error); polls async executions. The jobs are in
 * the modules it composes, each depending only on those below it:
 *   outgoing.ts (the request as sent) · answers.ts (answers as the agent sees them, redacted) ·
 *   async-status.ts + status-target.ts (what a 202 means and which status URL may be fetched) ·
 *   runtime.ts (per-API facts worked out at start-up).
 */
import type { ApiExecutionSettings } from '../config/settings.js';
import { ProtocolError } from '../errors.js';
import type { Catalog } from '../openapi/catalog.js';
import { essence } from '../openapi/media.js';
import type { Capability, OperationBinding } from '../openapi/types.js';
import { callFailure, dataOf, discard, failureOf, readAnswer, relayedStream } from './answers.js';
import { asyncLocation, headerValue, pollState, retryAfterOf, type AsyncState } from './async-status.js';
import type { UpstreamClient, UpstreamReply } from './client.js';
import type { AppliedCredentials } from './credentials.js';
import { OAuthTokens, TokenError } from './oauth.js';
import {
  pinnedValue,
  requestParts,
  upstreamHeaders,
  upstreamPath,
  withPins,
  type RequestContext,
} from './outgoing.js';
import type { UpstreamRequestParts } from './request-parts.js';
import { contentTypeOf } from './results.js';
import { apiRuntimes, type ApiRuntime, type CallerIdentity } from './runtime.js';
import { statusTarget, type StatusTarget } from './status-target.js';

export { validTraceparent } from './outgoing.js';
export type { AsyncState } from './async-status.js';
export type { CallerIdentity } from './runtime.js';

export interface ExecutionRequest extends RequestContext {
  readonly capability: Capability;
  readonly args: Readonly<Record<string, unknown>>;
  /** Cancels the call when aborted (the agent went away); the upstream client also uses it. */
  readonly controller?: AbortController;
}

export type ExecutionOutcome =
  | { readonly kind: 'data'; readonly data: unknown; readonly upstreamStatus: number }
  | {
      readonly kind: 'stream';
      /** The event stream, decoded and with secrets redacted across events. */
      readonly reply: UpstreamReply;
      readonly upstreamStatus: number;
      /** Redacts the service's secrets from relayed event text, as for every other body. */
      readonly scrub: (text: string) => string;
    }
  | {
      readonly kind: 'async';
      /** The upstream's status URL, resolved; it maps to `statusCapability`. */
      readonly upstreamUrl: string;
      /** The GET capability the status URL is a call of: polling needs a grant for it. */
      readonly statusCapability: string;
      readonly upstreamStatus: number;
      readonly retryAfter?: string;
    };

/** A call the agent must be allowed to make itself; throws (a ProtocolError) when it may not. */
export type AuthorizeCall = (call: { name: string; args: Readonly<Record<string, unknown>> }) => void;

export interface PollRequest extends RequestContext {
  readonly upstreamUrl: string;
  /** The capability stored with the job when the status URL was accepted. */
  readonly statusCapability: string | null;
  /** Checks the polling agent's grant (and its constraints) for each URL before it is fetched. */
  readonly authorize: AuthorizeCall;
}

export interface ExecutorOptions {
  readonly catalog: Catalog;
  readonly settings: ReadonlyMap<string, ApiExecutionSettings>;
  readonly baseUrlFor: (apiId: string) => string | undefined;
  readonly client: UpstreamClient;
  readonly oauth: OAuthTokens;
  /** Lower case; the header the proxy's request id goes upstream in (config server.request_id_header). */
  readonly requestIdHeader: string;
}

/** A status URL made into the call it stands for. */
interface ResolvedTarget {
  readonly capability: Capability;
  /** The arguments the agent could have sent itself (pinned ones taken out). */
  readonly args: Readonly<Record<string, unknown>>;
  readonly parts: UpstreamRequestParts;
  readonly url: string;
}

export class Executor {
  private readonly apis: Map<string, ApiRuntime>;
  private readonly client: UpstreamClient;
  private readonly requestIdHeader: string;

  constructor(options: ExecutorOptions) {
    this.apis = apiRuntimes(options.catalog, options.settings, options.baseUrlFor, options.oauth);
    this.client = options.client;
    this.requestIdHeader = options.requestIdHeader;
  }

  /** Start-up diagnostics: APIs without a base URL, credentials for unknown or missing schemes. */
  problems(catalog: Catalog): { errors: string[]; warnings: string[] } {
    const errors: string[] = [];
    const warnings: string[] = [];
    for (const api of this.apis.values()) {
      const id = api.info.id;
      if (!api.origin)
        warnings.push(`API ${id}: no usable upstream URL; set upstream (its executions fail with 502)`);
      const ops = catalog.capabilities.filter((c) => c.operation.apiId === id);
      const { missing, unknown } = api.credentials.check(ops.map((c) => c.operation.security));
      for (const name of unknown) {
        errors.push(`API ${id}: credentials.${name} names no security scheme of the document`);
      }
      for (const conflict of api.credentials.conflicts(ops.map((c) => c.operation.security))) {
        errors.push(
          `API ${id}: operations require security schemes that are sent in one place ` +
            `(${conflict}); configure a credential for only one of them`,
        );
      }
      for (const name of missing) {
        warnings.push(
          `API ${id}: operations require security scheme ${name} but no credential is configured`,
        );
      }
      for (const name of Object.keys(api.settings.operations)) {
        const c = catalog.get(name);
        if (!c || c.operation.apiId !== id) {
          errors.push(`API ${id}: operations.${name} names no capability of this API`);
        }
      }
      for (const [scheme, info] of Object.entries(api.info.securitySchemes)) {
        if (
          info.type === 'apiKey' &&
          info.in === 'header' &&
          info.name?.toLowerCase() === this.requestIdHeader
        ) {
          errors.push(
            `API ${id}: server.request_id_header ${this.requestIdHeader} is the header of security scheme ${scheme}`,
          );
        }
      }
    }
    return { errors, warnings };
  }

  async execute(request: ExecutionRequest): Promise<ExecutionOutcome> {
    const { capability } = request;
    const op = capability.operation;
    const api = this.runtime(op.apiId);
    const pins = api.settings.operations[capability.name]?.pin;
    const parts = requestParts(op, withPins(capability.name, request.args, request.caller, pins));
    const timeoutMs = api.settings.operations[capability.name]?.timeoutMs ?? api.settings.timeoutMs;
    const reply = await this.send(api, op, parts, request, timeoutMs, request.controller);
    const contentType = contentTypeOf(reply.headers);
    const ok = reply.status >= 200 && reply.status < 300;
    if (ok && essence(contentType) === 'text/event-stream') {
      return {
        kind: 'stream',
        reply: relayedStream(api, reply),
        upstreamStatus: reply.status,
        scrub: (t) => api.redactor.text(t),
      };
    }
    const body = await readAnswer(api, reply);
    if (reply.status === 202) {
      const location = asyncLocation(reply, contentType, body);
      if (location !== undefined)
        return this.accepted(api, reply, location, api.basePath + parts.path, request);
    }
    if (ok)
      return {
        kind: 'data',
        data: dataOf(api, body, contentType, reply.status),
        upstreamStatus: reply.status,
      };
    throw failureOf(api, reply.status, contentType, body);
  }

  /**
   * Polls an async execution (§5.11): the stored status URL is fetched only as the call of its
   * GET capability, and only once `authorize` allows the agent that call; a 303 to the result
   * likewise, once.
   */
  async poll(request: PollRequest): Promise<AsyncState> {
    const capability = request.statusCapability ? this.catalogOperation(request.statusCapability) : undefined;
    if (!capability) {
      throw new ProtocolError(
        'upstream_error',
        'The status URL of this execution is no operation the proxy serves (now), so it is not followed.',
      );
    }
    const api = this.runtime(capability.operation.apiId);
    const target = this.resolve(api, request.upstreamUrl, api.basePath + '/', request.caller);
    if (!target || target.capability !== capability) {
      throw new ProtocolError(
        'upstream_error',
        'The status URL no longer maps to the operation it was stored for.',
      );
    }
    let reply = await this.get(api, target, request);
    if (reply.status === 303) {
      discard(reply);
      const location = headerValue(reply.headers.location);
      const result =
        location === undefined
          ? undefined
          : this.resolve(api, location, new URL(target.url).pathname, request.caller);
      if (!result) {
        return {
          status: 'failed',
          error: {
            error: 'upstream_error',
            message:
              'The upstream pointed to a result that is no GET operation of its API, so it was not followed.',
          },
        };
      }
      reply = await this.get(api, result, request);
    }
    const body = await readAnswer(api, reply);
    const contentType = contentTypeOf(reply.headers);
    const retryAfter = retryAfterOf(reply.headers);
    if (reply.status === 202) return { status: 'pending', ...(retryAfter ? { retryAfter } : {}) };
    if (reply.status >= 300 || reply.status < 200) {
      return { status: 'failed', error: failureOf(api, reply.status, contentType, body).toBody() };
    }
    return pollState(dataOf(api, body, contentType, reply.status), retryAfter);
  }

  close(): Promise<void> {
    return this.client.close();
  }

  /** A 202 with a status URL: accepted only when the URL is a call of a GET operation of the API. */
  private accepted(
    api: ApiRuntime,
    reply: UpstreamReply,
    location: string,
    requestPath: string,
    request: ExecutionRequest,
  ): ExecutionOutcome {
    const target = this.resolve(api, location, requestPath, request.caller);
    if (!target) {
      throw new ProtocolError(
        'upstream_error',
        'The upstream API pointed to a status URL that is no GET operation of its API, so the proxy will not follow it.',
        { fields: { upstream_status: 202 } },
      );
    }
    const retryAfter = retryAfterOf(reply.headers);
    return {
      kind: 'async',
      upstreamUrl: target.url,
      statusCapability: target.capability.name,
      upstreamStatus: 202,
      ...(retryAfter ? { retryAfter } : {}),
    };
  }

  /**
   * The call an upstream URL stands for (status-target.ts), pins applied: a pinned argument the
   * URL carries must be the pinned value, and the request must build as an execution would.
   */
  private resolve(
    api: ApiRuntime,
    location: string,
    relativeTo: string,
    caller: CallerIdentity,
  ): ResolvedTarget | undefined {
    const target: StatusTarget | undefined = statusTarget(api, api.getOperations, location, relativeTo);
    if (!target) return undefined;
    const { capability } = target;
    const pins = api.settings.operations[capability.name]?.pin ?? {};
    for (const [name, pin] of Object.entries(pins)) {
      if (!Object.hasOwn(target.args, name)) continue;
      let pinned: unknown;
      try {
        pinned = pinnedValue(capability.name, caller, pin);
      } catch {
        return undefined;
      }
      if (String(pinned) !== String(target.args[name])) return undefined;
    }
    // Pinned arguments are no input of the agent's: its grant is checked on the rest.
    const args = Object.fromEntries(
      Object.entries(target.args).filter(([name]) => !Object.hasOwn(pins, name)),
    );
    let parts: UpstreamRequestParts;
    try {
      parts = requestParts(capability.operation, withPins(capability.name, args, caller, pins));
    } catch {
      return undefined;
    }
    return { capability, args, parts, url: target.url };
  }

  private async get(api: ApiRuntime, target: ResolvedTarget, request: PollRequest): Promise<UpstreamReply> {
    // The agent must be allowed this very call (grant, constraints) before anything is sent.
    request.authorize({ name: target.capability.name, args: target.args });
    return this.send(api, target.capability.operation, target.parts, request, api.settings.timeoutMs);
  }

  /** Sends with the operation's credentials; a 401 with a cached OAuth token refreshes it once. */
  private async send(
    api: ApiRuntime,
    op: OperationBinding,
    parts: UpstreamRequestParts,
    request: RequestContext,
    timeoutMs: number,
    controller?: AbortController,
  ): Promise<UpstreamReply> {
    const attempt = async (
      refresh: boolean,
    ): Promise<{ reply: UpstreamReply; creds: AppliedCredentials }> => {
      const creds = await this.credentials(api, op, refresh);
      const reply = await this.call(api, {
        path: upstreamPath(api, parts, creds),
        method: parts.method,
        headers: upstreamHeaders(api, op, parts, creds, request, this.requestIdHeader),
        ...(parts.body ? { body: parts.body.bytes } : {}),
        timeoutMs,
        ...(controller ? { controller } : {}),
      });
      return { reply, creds };
    };
    const first = await attempt(false);
    if (first.reply.status !== 401 || first.creds.oauthScheme === undefined) return first.reply;
    // The cached token may have been revoked early: fetch a new one, once.
    discard(first.reply);
    return (await attempt(true)).reply;
  }

  private runtime(apiId: string): ApiRuntime {
    const api = this.apis.get(apiId);
    if (!api) throw new Error(`unknown API ${apiId}`);
    return api;
  }

  private catalogOperation(name: string): Capability | undefined {
    for (const api of this.apis.values()) {
      const found = api.getOperations.find((c) => c.name === name);
      if (found) return found;
    }
    return undefined;
  }

  private async credentials(
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
        );
      }
      throw err;
    }
  }

  private async call(
    api: ApiRuntime,
    call: {
      path: string;
      method: string;
      headers: Record<string, string>;
      body?: Buffer;
      timeoutMs: number;
      controller?: AbortController;
    },
  ): Promise<UpstreamReply> {
    if (!api.origin) {
      throw new ProtocolError(
        'upstream_unavailable',
        `No upstream URL is configured for API ${api.info.id}.`,
      );
    }
    try {
      return await this.client.send({
        origin: api.origin,
        ...call,
        retries: api.settings.retries,
        retryBackoffMs: api.settings.retryBackoffMs,
      });
    } catch (err) {
      throw callFailure(err, call.timeoutMs);
    }
  }
}
