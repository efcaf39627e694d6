/**
 * Calls the upstream operation behind a capability for an authorized agent: pinned arguments
 * added, the request built exactly as the operation declares, the service's credentials and
 * static headers applied, nothing of the agent's own request forwarded, and the answer turned
 * into a §5.11 outcome (data, stream, async or error).
 */
import type { ApiExecutionSettings, PinnedValue } from '../config/settings.js';
import { ProtocolError } from '../errors.js';
import type { Catalog } from '../openapi/catalog.js';
import { essence } from '../openapi/media.js';
import type { ApiInfo, Capability, OperationBinding } from '../openapi/types.js';
import { readBody, UpstreamCallError, type UpstreamClient, type UpstreamReply } from './client.js';
import { ServiceCredentials, type AppliedCredentials } from './credentials.js';
import { OAuthTokens, TokenError } from './oauth.js';
import { ArgumentError, buildRequestParts, cookieHeader } from './request-parts.js';
import { sentRequest, type SentRequestCheck } from './sent-values.js';
import {
  bodyText,
  contentTypeOf,
  decodeData,
  decodeText,
  isTextData,
  upstreamError,
  UPSTREAM_ERROR_READ_BYTES,
} from './results.js';

export interface CallerIdentity {
  readonly agentId: string;
  readonly hostId: string;
  readonly userId: string | null;
}

export interface ExecutionRequest {
  readonly capability: Capability;
  readonly args: Readonly<Record<string, unknown>>;
  readonly caller: CallerIdentity;
  readonly requestId: string;
  /** A valid W3C traceparent from the agent's request, propagated as is. */
  readonly traceparent?: string;
  /** Cancels the call when aborted (the agent went away); the upstream client also uses it. */
  readonly controller?: AbortController;
}

export type ExecutionOutcome =
  | { readonly kind: 'data'; readonly data: unknown; readonly upstreamStatus: number }
  | {
      readonly kind: 'stream';
      readonly reply: UpstreamReply;
      readonly upstreamStatus: number;
      /** Redacts the service's secrets from relayed event text, as for every other body. */
      readonly scrub: (text: string) => string;
    }
  | {
      readonly kind: 'async';
      readonly upstreamUrl: string;
      readonly upstreamStatus: number;
      readonly retryAfter?: string;
    };

/** §5.11 async states as the proxy reports them to a polling agent. */
export type AsyncState =
  | { readonly status: 'pending'; readonly retryAfter?: string }
  | { readonly status: 'completed'; readonly result: unknown }
  | { readonly status: 'failed'; readonly error: Record<string, unknown> };

/** Everything the executor knows about one API: where it lives and how to authenticate. */
interface ApiRuntime {
  readonly info: ApiInfo;
  /** `https://host:port`, or undefined when no usable base URL is configured. */
  readonly origin?: string;
  /** The base URL's path without a trailing slash, e.g. `/v1`. */
  readonly basePath: string;
  readonly settings: ApiExecutionSettings;
  readonly credentials: ServiceCredentials;
  readonly secrets: readonly string[];
}

const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;
const PENDING_WORDS = new Set([
  'pending',
  'queued',
  'running',
  'in_progress',
  'inprogress',
  'processing',
  'accepted',
  'started',
]);
const FAILED_WORDS = new Set(['failed', 'failure', 'error', 'errored', 'cancelled', 'canceled', 'rejected']);
const ASYNC_URL_FIELDS = ['status_url', 'statusUrl', 'monitor', 'href'];

export function validTraceparent(value: string | string[] | undefined): string | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  return v !== undefined && TRACEPARENT.test(v) && !v.startsWith('ff') ? v : undefined;
}

export class Executor {
  private readonly apis = new Map<string, ApiRuntime>();
  /** secretForms of each cached OAuth token; dropped wholesale once stale tokens pile up. */
  private readonly tokenForms = new Map<string, readonly string[]>();

  constructor(
    catalog: Catalog,
    settings: ReadonlyMap<string, ApiExecutionSettings>,
    baseUrlFor: (apiId: string) => string | undefined,
    private readonly client: UpstreamClient,
    private readonly oauth: OAuthTokens,
    /** Grant constraints against the request as built (§2.13); throws to refuse. */
    private readonly checkSent: SentRequestCheck,
  ) {
    for (const info of catalog.apis) {
      const apiSettings = settings.get(info.id);
      if (!apiSettings) throw new Error(`no execution settings for API ${info.id}`);
      const base = parseBase(baseUrlFor(info.id));
      this.apis.set(info.id, {
        info,
        ...base,
        settings: apiSettings,
        credentials: new ServiceCredentials(info.id, info.securitySchemes, apiSettings.credentials, oauth),
        secrets: collectSecrets(apiSettings),
      });
    }
  }

  /** Start-up diagnostics: APIs without a base URL, credentials for unknown or missing schemes. */
  problems(catalog: Catalog): { errors: string[]; warnings: string[] } {
    const errors: string[] = [];
    const warnings: string[] = [];
    for (const api of this.apis.values()) {
      if (!api.origin)
        warnings.push(
          `API ${api.info.id}: no usable upstream URL; set upstream (its executions fail with 502)`,
        );
      const ops = catalog.capabilities.filter((c) => c.operation.apiId === api.info.id);
      const { missing, unknown } = api.credentials.check(ops.map((c) => c.operation.security));
      for (const name of unknown) {
        errors.push(`API ${api.info.id}: credentials.${name} names no security scheme of the document`);
      }
      for (const conflict of api.credentials.conflicts(ops.map((c) => c.operation.security))) {
        errors.push(
          `API ${api.info.id}: operations require security schemes that are sent in one place ` +
            `(${conflict}); configure a credential for only one of them`,
        );
      }
      for (const name of missing) {
        warnings.push(
          `API ${api.info.id}: operations require security scheme ${name} but no credential is configured`,
        );
      }
      for (const name of Object.keys(api.settings.operations)) {
        const c = catalog.get(name);
        if (!c || c.operation.apiId !== api.info.id) {
          errors.push(`API ${api.info.id}: operations.${name} names no capability of this API`);
        }
      }
    }
    return { errors, warnings };
  }

  async execute(request: ExecutionRequest): Promise<ExecutionOutcome> {
    const op = request.capability.operation;
    const api = this.runtime(op.apiId);
    const pins = api.settings.operations[request.capability.name]?.pin;
    const args = withPins(request, pins);
    let parts;
    let sent;
    try {
      parts = buildRequestParts(op, args);
      sent = sentRequest(op, args, parts, Object.keys(pins ?? {}));
    } catch (err) {
      if (err instanceof ArgumentError) {
        throw new ProtocolError('invalid_request', err.message, {
          fields: { errors: [{ path: `/${err.argument}`, message: err.message }] },
        });
      }
      throw err;
    }
    this.checkSent(request, sent);
    const timeoutMs = api.settings.operations[request.capability.name]?.timeoutMs ?? api.settings.timeoutMs;
    const send = async (refresh: boolean): Promise<{ reply: UpstreamReply; creds: AppliedCredentials }> => {
      const creds = await this.credentials(api, op, refresh);
      const headers = this.headers(api, request, creds, parts.headers, parts.cookies, op);
      if (parts.body) headers['content-type'] = parts.body.contentType;
      const reply = await this.call(api, {
        path: withQuery(api.basePath + parts.path, creds.query),
        method: parts.method,
        headers,
        ...(parts.body ? { body: parts.body.bytes } : {}),
        timeoutMs,
        ...(request.controller ? { controller: request.controller } : {}),
      });
      return { reply, creds };
    };
    const first = await send(false);
    let reply = first.reply;
    if (reply.status === 401 && first.creds.oauthScheme !== undefined) {
      // The cached token may have been revoked early: fetch a new one, once.
      discard(reply);
      ({ reply } = await send(true));
    }
    return this.outcome(api, reply, parts.path);
  }

  /** Polls an upstream status URL for an async execution (§5.11) with the API's credentials. */
  async poll(
    capability: Capability,
    upstreamUrl: string,
    caller: CallerIdentity,
    requestId: string,
  ): Promise<AsyncState> {
    const op = capability.operation;
    const api = this.runtime(op.apiId);
    const get = async (target: string): Promise<UpstreamReply> => {
      const url = sameOrigin(api, target);
      if (!url) throw new ProtocolError('upstream_error', 'The status URL is not on the API origin.');
      const creds = await this.credentials(api, op, false);
      const headers = this.headers(api, { caller, requestId }, creds, {}, [], op);
      headers.accept = 'application/json';
      return this.call(api, {
        path: withQuery(url.pathname + url.search, creds.query),
        method: 'GET',
        headers,
        timeoutMs: api.settings.timeoutMs,
      });
    };
    let reply = await get(upstreamUrl);
    // A common async pattern: the status URL answers 303 See Other with the finished result.
    // Followed once, and only on the API's own origin.
    const seeOther = reply.status === 303 ? headerValue(reply.headers.location) : undefined;
    if (seeOther !== undefined) {
      discard(reply);
      const next = sameOrigin(api, seeOther, new URL(upstreamUrl).pathname);
      if (!next) {
        return {
          status: 'failed',
          error: { error: 'upstream_error', message: 'The upstream pointed to a result on another origin.' },
        };
      }
      reply = await get(next.href);
    }
    const body = await this.read(api, reply);
    const contentType = contentTypeOf(reply.headers);
    const retryAfter = headerValue(reply.headers['retry-after']);
    if (reply.status === 202) return { status: 'pending', ...(retryAfter ? { retryAfter } : {}) };
    if (reply.status >= 300) {
      const err = upstreamError(reply.status, contentType, body, (t) => this.scrub(api, t));
      return { status: 'failed', error: err.toBody() };
    }
    const data = this.dataOf(api, body, contentType, reply.status);
    if (data !== null && typeof data === 'object' && !Array.isArray(data)) {
      const record = data as Record<string, unknown>;
      const word = typeof record.status === 'string' ? record.status.toLowerCase() : undefined;
      if (word !== undefined && PENDING_WORDS.has(word)) {
        return { status: 'pending', ...(retryAfter ? { retryAfter } : {}) };
      }
      if (word !== undefined && FAILED_WORDS.has(word)) {
        const error = record.error;
        return {
          status: 'failed',
          error: {
            error: 'upstream_error',
            message:
              typeof error === 'string'
                ? error
                : typeof (error as { message?: unknown } | undefined)?.message === 'string'
                  ? (error as { message: string }).message
                  : 'The upstream operation failed.',
            upstream_body: record,
          },
        };
      }
      if (word !== undefined && 'result' in record) return { status: 'completed', result: record.result };
    }
    return { status: 'completed', result: data };
  }

  close(): Promise<void> {
    return this.client.close();
  }

  private runtime(apiId: string): ApiRuntime {
    const api = this.apis.get(apiId);
    if (!api) throw new Error(`unknown API ${apiId}`);
    return api;
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

  private headers(
    api: ApiRuntime,
    request: { caller: CallerIdentity; requestId: string; traceparent?: string },
    creds: AppliedCredentials,
    parameterHeaders: Readonly<Record<string, string>>,
    parameterCookies: readonly (readonly [string, string])[],
    op: OperationBinding,
  ): Record<string, string> {
    // Later entries win: an agent-supplied header parameter can never replace the operator's
    // static headers, the service credentials or the identity headers.
    const headers: Record<string, string> = { ...parameterHeaders };
    for (const [name, value] of Object.entries(api.settings.headers)) headers[name.toLowerCase()] = value;
    Object.assign(headers, creds.headers);
    // A parameter cookie named like a credential cookie (an agent can choose names through an
    // exploded object) is dropped: the upstream must only ever see the service's value.
    const credentialCookies = new Set(creds.cookies.map(([name]) => name));
    const cookies = [...parameterCookies.filter(([name]) => !credentialCookies.has(name)), ...creds.cookies];
    if (cookies.length > 0) headers.cookie = cookieHeader(cookies);
    headers.accept = acceptFor(op);
    headers['x-request-id'] = request.requestId;
    if (request.traceparent) headers.traceparent = request.traceparent;
    const identity = api.settings.identityHeaders;
    if (identity?.agent) headers[identity.agent.toLowerCase()] = request.caller.agentId;
    if (identity?.host) headers[identity.host.toLowerCase()] = request.caller.hostId;
    if (identity?.user && request.caller.userId !== null)
      headers[identity.user.toLowerCase()] = request.caller.userId;
    return headers;
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

  /** `truncateAt`: read at most that many bytes and keep them, instead of failing on size. */
  private async read(api: ApiRuntime, reply: UpstreamReply, truncateAt?: number): Promise<Buffer> {
    try {
      return await readBody(reply, truncateAt ?? api.settings.maxResponseBytes, truncateAt !== undefined);
    } catch (err) {
      throw callFailure(err, api.settings.timeoutMs);
    }
  }

  private async outcome(
    api: ApiRuntime,
    reply: UpstreamReply,
    requestPath: string,
  ): Promise<ExecutionOutcome> {
    const contentType = contentTypeOf(reply.headers);
    if (reply.status >= 200 && reply.status < 300 && essence(contentType) === 'text/event-stream') {
      return { kind: 'stream', reply, upstreamStatus: reply.status, scrub: (t) => this.scrub(api, t) };
    }
    // An error body is only echoed up to its own cap (results.ts): a 4xx keeps its status even
    // when its body is bigger than max_response_bytes, and no more than the cap is read.
    const failed = reply.status < 200 || reply.status >= 300;
    const body = await this.read(api, reply, failed ? UPSTREAM_ERROR_READ_BYTES : undefined);
    if (reply.status === 202) {
      const location = asyncLocation(reply, contentType, body);
      if (location !== undefined) {
        const url = sameOrigin(api, location, api.basePath + requestPath);
        if (!url) {
          throw new ProtocolError(
            'upstream_error',
            'The upstream API pointed to a status URL on another origin.',
            {
              fields: { upstream_status: 202 },
            },
          );
        }
        const retryAfter = headerValue(reply.headers['retry-after']);
        return {
          kind: 'async',
          upstreamUrl: url.href,
          upstreamStatus: 202,
          ...(retryAfter ? { retryAfter } : {}),
        };
      }
    }
    if (reply.status >= 200 && reply.status < 300) {
      return {
        kind: 'data',
        data: this.dataOf(api, body, contentType, reply.status),
        upstreamStatus: reply.status,
      };
    }
    throw upstreamError(reply.status, contentType, body, (t) => this.scrub(api, t));
  }

  /**
   * A success body as `data`, with nothing of the service's credentials in it: an upstream may echo
   * one back (a debug endpoint, a reflected header). Text is decoded in its charset, then redacted.
   * A binary body cannot be rewritten without corrupting it, and the agent would decode its
   * base64, so one that holds a secret is withheld whole.
   */
  private dataOf(api: ApiRuntime, body: Buffer, contentType: string, status: number): unknown {
    if (body.length === 0) return null;
    if (isTextData(essence(contentType))) {
      return decodeText(contentType, this.scrub(api, bodyText(contentType, body)));
    }
    if (this.secretsOf(api).some((s) => s.length >= 8 && body.includes(s))) {
      throw new ProtocolError(
        'upstream_error',
        'The upstream answer contains a credential of the service, so the proxy withheld it.',
        { fields: { upstream_status: status } },
      );
    }
    return decodeData(contentType, body);
  }

  /**
   * The static secrets of the API in every form they travel in, plus OAuth tokens (as sent and
   * JSON-escaped) only when some are cached (no copy otherwise).
   */
  private secretsOf(api: ApiRuntime): readonly string[] {
    const tokens = this.oauth.currentTokens();
    if (tokens.length === 0) return api.secrets;
    // Forms are worked out once per token, not on every answer (or every relayed event).
    if (this.tokenForms.size > tokens.length * 2) this.tokenForms.clear();
    const forms = tokens.flatMap((token) => {
      let cached = this.tokenForms.get(token);
      if (!cached) {
        cached = secretForms(token);
        this.tokenForms.set(token, cached);
      }
      return cached;
    });
    return [...api.secrets, ...forms];
  }

  private scrub(api: ApiRuntime, text: string): string {
    let out = text;
    for (const secret of this.secretsOf(api)) {
      if (secret.length >= 8 && out.includes(secret)) out = out.split(secret).join('[redacted]');
    }
    return out;
  }
}

function withPins(
  request: ExecutionRequest,
  pins: Readonly<Record<string, PinnedValue>> | undefined,
): Readonly<Record<string, unknown>> {
  if (!pins) return request.args;
  const args: Record<string, unknown> = { ...request.args };
  for (const [name, pin] of Object.entries(pins)) {
    if (typeof pin !== 'object') {
      args[name] = pin;
      continue;
    }
    const value =
      pin.from === 'agent_id'
        ? request.caller.agentId
        : pin.from === 'host_id'
          ? request.caller.hostId
          : request.caller.userId;
    if (value === null) {
      throw new ProtocolError(
        'unauthorized',
        `${request.capability.name} acts for a user, and this agent has none (autonomous agents cannot use it).`,
      );
    }
    args[name] = value;
  }
  return args;
}

function parseBase(base: string | undefined): { origin?: string; basePath: string } {
  if (!base) return { basePath: '' };
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    return { basePath: '' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { basePath: '' };
  return { origin: url.origin, basePath: url.pathname.replace(/\/+$/, '') };
}

/** A URL from the upstream (Location etc.), accepted only on the API's own origin. */
function sameOrigin(api: ApiRuntime, location: string, relativeTo = api.basePath + '/'): URL | undefined {
  if (!api.origin) return undefined;
  let url: URL;
  try {
    url = new URL(location, api.origin + relativeTo);
  } catch {
    return undefined;
  }
  return url.origin === api.origin ? url : undefined;
}

function asyncLocation(reply: UpstreamReply, contentType: string, body: Buffer): string | undefined {
  for (const name of ['location', 'operation-location', 'content-location']) {
    const v = headerValue(reply.headers[name]);
    if (v) return v;
  }
  const data = body.length > 0 ? safeJson(contentType, body) : undefined;
  if (data && typeof data === 'object' && !Array.isArray(data)) {
    for (const field of ASYNC_URL_FIELDS) {
      const v = (data as Record<string, unknown>)[field];
      if (typeof v === 'string' && v !== '') return v;
    }
  }
  return undefined;
}

function safeJson(contentType: string, body: Buffer): unknown {
  try {
    return decodeData(contentType, body);
  } catch {
    return undefined;
  }
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

// Computed once per operation (bindings live as long as the catalog).
const acceptByOperation = new WeakMap<OperationBinding, string>();

function acceptFor(op: OperationBinding): string {
  let accept = acceptByOperation.get(op);
  if (accept === undefined) {
    const types = [...new Set(op.responseMediaTypes.map(essence).filter((t) => t !== ''))];
    accept = types.length > 0 ? `${types.join(', ')}, */*;q=0.1` : 'application/json, */*;q=0.1';
    acceptByOperation.set(op, accept);
  }
  return accept;
}

/**
 * Appends credential query parameters, first removing any parameter of the same name the
 * request already carries (an agent can choose names through an exploded object parameter).
 */
function withQuery(path: string, extra: readonly (readonly [string, string])[]): string {
  if (extra.length === 0) return path;
  const names = new Set(extra.map(([k]) => k));
  const q = path.indexOf('?');
  const base = q === -1 ? path : path.slice(0, q);
  const kept =
    q === -1
      ? []
      : path
          .slice(q + 1)
          .split('&')
          .filter((pair) => pair !== '' && !names.has(safeDecode(pair.split('=')[0] ?? '')));
  const added = extra.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
  return `${base}?${[...kept, ...added].join('&')}`;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function discard(reply: UpstreamReply): void {
  reply.body.on('error', () => undefined);
  reply.body.resume();
}

function callFailure(err: unknown, timeoutMs: number): ProtocolError {
  if (err instanceof ProtocolError) return err;
  if (err instanceof UpstreamCallError) {
    if (err.kind === 'timeout') {
      return new ProtocolError('upstream_timeout', `The upstream API did not answer within ${timeoutMs} ms.`);
    }
    if (err.kind === 'too_large') return new ProtocolError('upstream_error', `${err.detail}.`);
    if (err.kind === 'aborted')
      return new ProtocolError('upstream_unavailable', 'The request was cancelled.');
    return new ProtocolError(
      'upstream_unavailable',
      `The upstream API could not be reached (${err.detail}).`,
    );
  }
  return new ProtocolError('upstream_unavailable', 'The upstream API could not be reached.');
}

function collectSecrets(settings: ApiExecutionSettings): string[] {
  const out: string[] = [...Object.values(settings.headers)];
  for (const c of Object.values(settings.credentials)) {
    // A single secret for an http basic scheme is sent base64-encoded: scrub that form too.
    if (c.kind === 'secret') out.push(c.value, Buffer.from(c.value, 'utf8').toString('base64'));
    else if (c.kind === 'basic')
      out.push(c.password, Buffer.from(`${c.username}:${c.password}`).toString('base64'));
    else out.push(c.clientSecret);
  }
  // Longest first, so a secret that contains another is redacted whole rather than in part.
  return [...new Set(out.flatMap(secretForms))].sort((a, b) => b.length - a.length);
}

/**
 * A secret as an upstream may echo it: as sent; percent-encoded, as a query credential travels
 * (and as a URL in a body shows it); form-encoded (`+` for spaces); JSON-escaped, as it appears
 * inside a JSON string that repeats a header, including the `\/` of PHP's encoder, the `\uXXXX` of
 * Python's default ASCII-only one, and once more for JSON carried inside a JSON string.
 */
function secretForms(secret: string): string[] {
  const json = JSON.stringify(secret).slice(1, -1);
  return [
    ...new Set([
      secret,
      encodeURIComponent(secret),
      new URLSearchParams({ s: secret }).toString().slice(2),
      json,
      json.replaceAll('/', '\\/'),
      json.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`),
      JSON.stringify(json).slice(1, -1),
    ]),
  ];
}
