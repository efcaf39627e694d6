/**
 * Calls the upstream operation behind a capability for an authorized agent and turns the answer
 * into a §5.11 outcome (data, stream, async or error); polls async executions. The jobs are in
 * the modules it composes, each depending only on those below it:
 *   outgoing.ts (the request as built) · sender.ts (credentials, transport) · answers.ts (answers
 *   as the agent sees them, redacted) · async-status.ts, status-target.ts, status-calls.ts (what
 *   a 202 means and which status URL may be fetched) · runtime.ts, problems.ts (start-up).
 */
import type { ApiExecutionSettings } from '../config/api-execution.js';
import { ProtocolError } from '../errors.js';
import type { Catalog } from '../openapi/catalog.js';
import { essence } from '../openapi/media.js';
import type { Capability } from '../openapi/types.js';
import { answerData, dataOf, discard, failureOf, readAnswer, readFailure, relayedStream } from './answers.js';
import { asyncLocation, headerValue, pollState, retryAfterOf, type AsyncState } from './async-status.js';
import type { Cancellation } from './cancellation.js';
import type { UpstreamClient, UpstreamReply } from './client.js';
import type { OAuthTokens } from './oauth.js';
import { refusingBadArguments, requestParts, withPins, type RequestContext } from './outgoing.js';
import type { UpstreamRequestParts } from './request-parts.js';
import { sentRequest, type SentRequest } from './sent-values.js';
import { executionProblems } from './problems.js';
import { staticSecrets } from './redaction.js';
import type { RetiredSecrets } from './retired-secrets.js';
import { contentTypeOf } from './results.js';
import { apiRuntimes, type ApiRuntime } from './runtime.js';
import { PathShadows } from './path-shadows.js';
import { Sender } from './sender.js';
import { statusCall, type StatusCall } from './status-calls.js';

export type { AsyncState } from './async-status.js';
export type { CallerIdentity } from './runtime.js';

/** An execution built and not yet sent: what the grant's constraints are checked against. */
export interface PreparedCall {
  readonly capability: Capability;
  readonly parts: UpstreamRequestParts;
  /** What the upstream will receive per field (§2.13: constraints hold for what is sent). */
  readonly sent: SentRequest;
}

export interface ExecutionRequest extends RequestContext {
  readonly call: PreparedCall;
  /** Cancels the call when aborted (the agent went away); the upstream client also uses it. */
  readonly controller?: Cancellation;
  /** Sent once, never retried: a per-call approval is a person's yes to one call. */
  readonly once?: boolean;
  /** Runs once credentials are at hand, before each send (see Sending.beforeSend). */
  readonly beforeSend?: () => Promise<void> | undefined;
}

export type ExecutionOutcome =
  | {
      readonly kind: 'data';
      readonly data: unknown;
      /** `data` as the upstream's own JSON text, when it answered JSON (answers.ts). */
      readonly json?: string;
      readonly upstreamStatus: number;
    }
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

/** A call the agent must be allowed to make itself; rejects (a ProtocolError) when it may not. */
export type AuthorizeCall = (call: {
  name: string;
  args: Readonly<Record<string, unknown>>;
  sent: SentRequest;
}) => Promise<void>;

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
  /** Static secrets earlier engines had and this one does not: still redacted for a while. */
  readonly retired?: RetiredSecrets;
  /** Lower case; the header the proxy's request id goes upstream in (config server.request_id_header). */
  readonly requestIdHeader: string;
  /** Receives each upstream call's duration (the upstream latency metric). */
  readonly observeUpstream?: (apiId: string, seconds: number) => void;
}

export class Executor {
  private readonly apis: Map<string, ApiRuntime>;
  private readonly sender: Sender;
  private readonly requestIdHeader: string;
  private readonly shadows: PathShadows;
  /** Fixed with the settings: an engine is rebuilt, not changed, on reload. */
  private readonly longestCall: number;

  constructor(options: ExecutorOptions) {
    this.apis = apiRuntimes(
      options.catalog,
      options.settings,
      options.baseUrlFor,
      options.oauth,
      options.retired,
    );
    this.sender = new Sender(options.client, options.requestIdHeader, options.observeUpstream);
    this.requestIdHeader = options.requestIdHeader;
    this.shadows = new PathShadows(options.catalog.capabilities);
    this.longestCall = longestDeadline(options.settings.values());
  }

  /**
   * The longest deadline of any one call (the API's `timeout`, or an operation's own): one call,
   * retries included, ends by then (client.ts), or twice that when an OAuth token is refreshed.
   */
  longestCallMs(): number {
    return this.longestCall;
  }

  /** Every API's static secrets (keys, passwords, secret headers): retired when a reload drops them. */
  staticSecrets(): string[] {
    return [...this.apis.values()].flatMap((api) => staticSecrets(api.settings));
  }

  /** Start-up diagnostics (problems.ts). */
  problems(catalog: Catalog): { errors: string[]; warnings: string[] } {
    return executionProblems(this.apis.values(), catalog, this.requestIdHeader);
  }

  /**
   * Builds the upstream request of an authorized execution (pins applied, styles serialized) and
   * reads back what it sends per field; nothing is sent yet. A bad argument is the agent's 400.
   */
  prepare(request: {
    capability: Capability;
    args: Readonly<Record<string, unknown>>;
    caller: RequestContext['caller'];
  }): PreparedCall {
    const { capability } = request;
    const op = capability.operation;
    const pins = this.runtime(op.apiId).settings.operations[capability.name]?.pin;
    const args = withPins(capability.name, request.args, request.caller, pins);
    const parts = requestParts(op, args);
    // Before anything is sent: the path must be this operation's, not a sibling's (path-shadows.ts).
    this.shadows.refuseShadowed(capability, parts.path);
    const sent = refusingBadArguments(() => sentRequest(op, args, parts, Object.keys(pins ?? {})));
    return { capability, parts, sent };
  }

  /** Sends a prepared call and maps the answer (data, an event stream, or an async job). */
  async execute(request: ExecutionRequest): Promise<ExecutionOutcome> {
    const { capability, parts } = request.call;
    const op = capability.operation;
    const api = this.runtime(op.apiId);
    const settings = api.settings.operations[capability.name];
    const reply = await this.sender.send(api, op, parts, request, {
      timeoutMs: settings?.timeoutMs ?? api.settings.timeoutMs,
      ...(request.controller ? { controller: request.controller } : {}),
      ...(request.once ? { once: true } : {}),
      ...(request.beforeSend ? { beforeSend: request.beforeSend } : {}),
    });
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
    if (!ok) throw failureOf(api, reply.status, contentType, await readFailure(api, reply));
    const read = readAnswer(api, reply);
    const body = read instanceof Promise ? await read : read;
    if (reply.status === 202) {
      const location = asyncLocation(reply, contentType, body);
      if (location !== undefined) return accepted(api, reply, location, api.basePath + parts.path, request);
    }
    // At once but for a compressed file, which is decoded to be checked (answers.ts).
    const answer = answerData(api, body, contentType, reply.status);
    return {
      kind: 'data',
      ...(answer instanceof Promise ? await answer : answer),
      upstreamStatus: reply.status,
    };
  }

  /**
   * Polls an async execution (§5.11): the stored status URL is fetched only as the call of its
   * GET capability, and only once `authorize` allows the agent that call; a 303 to the result
   * likewise, once.
   */
  async poll(request: PollRequest): Promise<AsyncState> {
    const stored = request.statusCapability;
    const api = stored === null ? undefined : this.apiServing(stored);
    const call = api && statusCall(api, request.upstreamUrl, api.basePath + '/', request.caller);
    if (!api || !call || call.capability.name !== stored) {
      throw new ProtocolError(
        'upstream_error',
        'The status URL of this execution maps to no operation it was accepted for, so it is not followed.',
      );
    }
    let reply = await this.get(api, call, request);
    if (reply.status === 303) {
      discard(reply);
      const location = headerValue(reply.headers.location);
      const result =
        location === undefined
          ? undefined
          : statusCall(api, location, new URL(call.url).pathname, request.caller);
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
    const contentType = contentTypeOf(reply.headers);
    if (reply.status >= 300 || reply.status < 200) {
      const failure = await readFailure(api, reply);
      return { status: 'failed', error: failureOf(api, reply.status, contentType, failure).toBody() };
    }
    const body = await readAnswer(api, reply);
    const retryAfter = retryAfterOf(reply.headers);
    if (reply.status === 202) return { status: 'pending', ...(retryAfter ? { retryAfter } : {}) };
    return pollState(await dataOf(api, body, contentType, reply.status), retryAfter);
  }

  private async get(api: ApiRuntime, call: StatusCall, request: PollRequest): Promise<UpstreamReply> {
    // The agent must be allowed this very call (grant, constraints) before anything is sent.
    await request.authorize({ name: call.capability.name, args: call.args, sent: call.sent });
    return this.sender.send(api, call.capability.operation, call.parts, request, {
      timeoutMs: api.settings.timeoutMs,
    });
  }

  private runtime(apiId: string): ApiRuntime {
    const api = this.apis.get(apiId);
    if (!api) throw new Error(`unknown API ${apiId}`);
    return api;
  }

  /** The API whose GET operations include that capability. */
  private apiServing(capability: string): ApiRuntime | undefined {
    return [...this.apis.values()].find((api) => api.getOperations.some((c) => c.name === capability));
  }
}

/** A 202 with a status URL: accepted only when the URL is a call of a GET operation of the API. */
function accepted(
  api: ApiRuntime,
  reply: UpstreamReply,
  location: string,
  requestPath: string,
  request: ExecutionRequest,
): ExecutionOutcome {
  const call = statusCall(api, location, requestPath, request.caller);
  if (!call) {
    throw new ProtocolError(
      'upstream_error',
      'The upstream API pointed to a status URL that is no GET operation of its API, so the proxy will not follow it.',
      { fields: { upstream_status: 202 } },
    );
  }
  const retryAfter = retryAfterOf(reply.headers);
  return {
    kind: 'async',
    upstreamUrl: call.url,
    statusCapability: call.capability.name,
    upstreamStatus: 202,
    ...(retryAfter ? { retryAfter } : {}),
  };
}

/** The longest `timeout` of any API or operation among these settings. */
function longestDeadline(apis: Iterable<ApiExecutionSettings>): number {
  let longest = 0;
  for (const api of apis) {
    longest = Math.max(longest, api.timeoutMs);
    for (const op of Object.values(api.operations)) longest = Math.max(longest, op.timeoutMs ?? 0);
  }
  return longest;
}
