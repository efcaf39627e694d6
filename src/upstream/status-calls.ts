/**
 * An upstream-chosen URL made into the call it stands for (status-target.ts), with the operator's
 * pins: a pinned argument the URL carries must be the pinned value for this caller, the agent's
 * grant is then checked on the rest, and the request is built exactly as an execution of that
 * capability would build it.
 */
import type { Capability } from '../openapi/types.js';
import { pinnedValue, refusingBadArguments, requestParts, withPins } from './outgoing.js';
import type { UpstreamRequestParts } from './request-parts.js';
import type { ApiRuntime, CallerIdentity } from './runtime.js';
import { sentRequest, type SentRequest } from './sent-values.js';
import { statusTarget } from './status-target.js';

export interface StatusCall {
  readonly capability: Capability;
  /** The arguments the agent could have sent itself (pinned ones taken out): what is authorized. */
  readonly args: Readonly<Record<string, unknown>>;
  readonly parts: UpstreamRequestParts;
  /** What the upstream receives per field, for the grant's constraints (§2.13). */
  readonly sent: SentRequest;
  /** The URL, resolved. */
  readonly url: string;
}

/** Undefined when the URL is no call of a GET operation of the API that this caller can make. */
export function statusCall(
  api: ApiRuntime,
  location: string,
  relativeTo: string,
  caller: CallerIdentity,
): StatusCall | undefined {
  const target = statusTarget(api, api.getOperations, location, relativeTo);
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
  const args = Object.fromEntries(Object.entries(target.args).filter(([name]) => !Object.hasOwn(pins, name)));
  let parts: UpstreamRequestParts;
  let sent: SentRequest;
  try {
    const pinnedArgs = withPins(capability.name, args, caller, pins);
    parts = requestParts(capability.operation, pinnedArgs);
    sent = refusingBadArguments(() =>
      sentRequest(capability.operation, pinnedArgs, parts, Object.keys(pins)),
    );
  } catch {
    return undefined;
  }
  return { capability, args, parts, sent, url: target.url };
}
