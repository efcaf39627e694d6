/**
 * The upstream request as it leaves the proxy: the agent's arguments (pins applied) built into
 * method, path, query, headers, cookies and body (request-parts.ts), then what only the proxy
 * sets — the operator's static headers, the service credentials, `Accept`, the request id, the
 * trace context and the identity headers. What the proxy sets always wins: an agent parameter of
 * the same name, in any spelling a server may read as that name, is removed (issue 10, classes 6
 * and 12). An operation's own header parameter stays the agent's, including one named like the
 * proxy's request-id header, which is then not sent (class 15).
 */
import type { PinnedValue } from '../config/api-execution.js';
import { ProtocolError } from '../errors.js';
import { nameKey } from '../openapi/credential-names.js';
import { essence } from '../openapi/media.js';
import type { OperationBinding } from '../openapi/types.js';
import type { AppliedCredentials } from './credentials.js';
import { refuseMethodOverride } from './method-override.js';
import {
  ArgumentError,
  buildRequestParts,
  cookieHeader,
  type UpstreamRequestParts,
} from './request-parts.js';
import type { ApiRuntime, CallerIdentity } from './runtime.js';

export interface RequestContext {
  readonly caller: CallerIdentity;
  readonly requestId: string;
  /** The outgoing W3C traceparent (trace-context.ts): the agent's trace id, the proxy's span id. */
  readonly traceparent?: string;
}

/** The arguments with the operator's pinned values in place of anything the agent sent. */
export function withPins(
  capability: string,
  args: Readonly<Record<string, unknown>>,
  caller: CallerIdentity,
  pins: Readonly<Record<string, PinnedValue>> | undefined,
): Readonly<Record<string, unknown>> {
  if (!pins) return args;
  const out: Record<string, unknown> = { ...args };
  for (const [name, pin] of Object.entries(pins)) out[name] = pinnedValue(capability, caller, pin);
  return out;
}

export function pinnedValue(capability: string, caller: CallerIdentity, pin: PinnedValue): unknown {
  if (typeof pin !== 'object') return pin;
  const value =
    pin.from === 'agent_id' ? caller.agentId : pin.from === 'host_id' ? caller.hostId : caller.userId;
  if (value === null) {
    throw new ProtocolError(
      'unauthorized',
      `${capability} acts for a user, and this agent has none (autonomous agents cannot use it).`,
    );
  }
  return value;
}

/**
 * request-parts.ts for an execution: an argument that cannot be sent, or that would override the
 * method (method-override.ts), is the agent's 400.
 */
export function requestParts(
  op: OperationBinding,
  args: Readonly<Record<string, unknown>>,
): UpstreamRequestParts {
  return refusingBadArguments(() => {
    const parts = buildRequestParts(op, args);
    refuseMethodOverride(op, args, parts);
    return parts;
  });
}

/** Runs `build`; an ArgumentError (an argument that cannot be sent) becomes the agent's 400. */
export function refusingBadArguments<T>(build: () => T): T {
  try {
    return build();
  } catch (err) {
    if (err instanceof ArgumentError) {
      throw new ProtocolError('invalid_request', err.message, {
        fields: { errors: [{ path: `/${err.argument}`, message: err.message }] },
      });
    }
    throw err;
  }
}

/** The request's path and query under the API's base path, credential query parameters added. */
export function upstreamPath(
  api: ApiRuntime,
  parts: UpstreamRequestParts,
  creds: AppliedCredentials,
): string {
  const path = api.basePath + parts.path;
  const q = path.indexOf('?');
  if (q === -1 && creds.query.length === 0) return path;
  const base = q === -1 ? path : path.slice(0, q);
  // An agent can choose query names through an exploded object: every spelling of a credential
  // parameter's name is dropped, so the upstream only ever reads the service's value.
  const kept =
    q === -1
      ? []
      : path
          .slice(q + 1)
          .split('&')
          .filter(
            (pair) => pair !== '' && !api.credentialQueryKeys.has(nameKey('query', pair.split('=')[0] ?? '')),
          );
  const added = creds.query.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
  const all = [...kept, ...added];
  return all.length > 0 ? `${base}?${all.join('&')}` : base;
}

export function upstreamHeaders(
  api: ApiRuntime,
  op: OperationBinding,
  parts: UpstreamRequestParts,
  creds: AppliedCredentials,
  request: RequestContext,
  requestIdHeader: string,
): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(parts.headers)) {
    if (!api.proxyHeaderKeys.has(nameKey('header', name))) headers[name] = value;
  }
  for (const [name, value] of Object.entries(api.settings.headers)) headers[name.toLowerCase()] = value;
  Object.assign(headers, creds.headers);
  // A cookie named like a credential cookie, in any spelling a server reads as it (an agent can
  // choose names through an exploded object: `session.id` is PHP's `session_id`), is dropped: the
  // upstream must only ever see the service's value. The service's cookies go first, since PHP,
  // Rack, Go, Werkzeug and npm `cookie` keep the first of repeated names.
  const agentCookies =
    api.credentialCookieKeys.size === 0
      ? parts.cookies
      : parts.cookies.filter(([name]) => !api.credentialCookieKeys.has(nameKey('cookie', name)));
  const cookies = creds.cookies.length === 0 ? agentCookies : [...creds.cookies, ...agentCookies];
  if (cookies.length > 0) headers.cookie = cookieHeader(cookies);
  if (parts.body) headers['content-type'] = parts.body.contentType;
  headers.accept = acceptFor(op);
  if (!declaresHeader(op, requestIdHeader)) headers[requestIdHeader] = request.requestId;
  if (request.traceparent) headers.traceparent = request.traceparent;
  const identity = api.settings.identityHeaders;
  if (identity?.agent) headers[identity.agent.toLowerCase()] = request.caller.agentId;
  if (identity?.host) headers[identity.host.toLowerCase()] = request.caller.hostId;
  if (identity?.user && request.caller.userId !== null)
    headers[identity.user.toLowerCase()] = request.caller.userId;
  return headers;
}

// Computed once per operation (bindings live as long as the catalog).
const headerKeysByOperation = new WeakMap<OperationBinding, ReadonlySet<string>>();
const acceptByOperation = new WeakMap<OperationBinding, string>();

/** Whether the operation has a header parameter of that name (its value is the agent's). */
function declaresHeader(op: OperationBinding, name: string): boolean {
  let keys = headerKeysByOperation.get(op);
  if (keys === undefined) {
    keys = new Set(op.parameters.filter((p) => p.in === 'header').map((p) => nameKey('header', p.name)));
    headerKeysByOperation.set(op, keys);
  }
  return keys.size > 0 && keys.has(nameKey('header', name));
}

function acceptFor(op: OperationBinding): string {
  let accept = acceptByOperation.get(op);
  if (accept === undefined) {
    const types = [...new Set(op.responseMediaTypes.map(essence).filter((t) => t !== ''))];
    accept = types.length > 0 ? `${types.join(', ')}, */*;q=0.1` : 'application/json, */*;q=0.1';
    acceptByOperation.set(op, accept);
  }
  return accept;
}
