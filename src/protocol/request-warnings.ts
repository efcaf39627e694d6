/**
 * The warnings an approval page shows above a request (§8.10): names that carried markup or
 * hidden characters, mix scripts or borrow a brand (src/protocol/name-warnings.ts), and requests
 * for unusually broad access. Warnings inform; they never decide. Every quoted piece of agent
 * text is made plain and capped here, and the view escapes the whole warning.
 *
 * "Unusually broad" (BROAD, §8.10 "warn if the host is requesting unusually broad access"): a
 * request is broad when any of these holds —
 *  - it asks for more than BROAD.maxCapabilities (10) capabilities;
 *  - the service offers at least BROAD.minServiceSize (4) capabilities and the request covers at
 *    least BROAD.shareOfService (three quarters) of them: close to "everything";
 *  - the service has at least BROAD.minDataChanging (2) data-changing capabilities (any method
 *    but GET and HEAD) and the request asks for every one of them.
 * Blocked capabilities are not part of what the service offers.
 */
import type { ProtocolContext } from './context.js';
import { isReadOnlyMethod, type DeviceRequest } from './device.js';
import { plainText } from './display-text.js';
import { brandMatches, mixedScriptWords, WELL_KNOWN_BRANDS } from './name-warnings.js';

export type WarningKind = 'markup' | 'hidden' | 'mixed_script' | 'brand' | 'own_name' | 'broad';

export interface RequestWarning {
  readonly kind: WarningKind;
  /** Plain text (agent text in it already made plain and capped); the view escapes it. */
  readonly text: string;
}

export const BROAD = {
  maxCapabilities: 10,
  minServiceSize: 4,
  shareOfService: 0.75,
  minDataChanging: 2,
} as const;

/** A piece of agent text quoted inside a warning. */
function quote(text: string): string {
  return `“${plainText(text, 40).text}”`;
}

/**
 * What a name an agent chose (its own, or its host's) should warn about. `operatorNames`: the
 * policy's approval.warn_names, checked like the well-known brands.
 */
export function nameWarnings(
  field: string,
  value: string | null,
  serviceName: string,
  operatorNames: readonly string[] = [],
): RequestWarning[] {
  if (value === null || value === '') return [];
  const out: RequestWarning[] = [];
  const plain = plainText(value, Number.MAX_SAFE_INTEGER);
  if (plain.markup) {
    out.push({
      kind: 'markup',
      text: `The ${field} contained HTML markup, which was removed. Honest agents do not need markup in a name.`,
    });
  }
  if (plain.hidden) {
    out.push({
      kind: 'hidden',
      text: `The ${field} contained invisible or text-direction characters, which were removed: they can make a name read differently from what it is.`,
    });
  }
  for (const { word, scripts } of mixedScriptWords(value)) {
    out.push({
      kind: 'mixed_script',
      text: `The ${field} mixes alphabets in ${quote(word)} (${scripts.join(' and ')}): letters that look alike but are not the same are a common disguise.`,
    });
  }
  for (const { brand, how } of brandMatches(value, [serviceName, ...operatorNames, ...WELL_KNOWN_BRANDS])) {
    const own = brand === serviceName;
    const what = own
      ? `this service’s own name, ${quote(brand)}`
      : operatorNames.includes(brand)
        ? `the name ${quote(brand)}`
        : `the well-known name ${quote(brand)}`;
    out.push({
      kind: own ? 'own_name' : 'brand',
      text:
        how === 'mention'
          ? `The ${field} uses ${what}. Anyone can choose that name: this server has not verified that the agent comes from ${own ? 'this service' : brand}.`
          : `The ${field} looks like ${what} but is spelled differently. This is how impostors disguise themselves.`,
    });
  }
  return out;
}

export interface CapabilityKind {
  readonly name: string;
  /** Upper-case HTTP method; null when unknown (counts as data-changing). */
  readonly method: string | null;
}

/** The broad-request warning, if the request is unusually broad (rule in the header). */
export function broadRequest(
  requested: readonly CapabilityKind[],
  service: readonly CapabilityKind[],
): RequestWarning | undefined {
  const asked = new Set(requested.map((c) => c.name));
  const reasons: string[] = [];
  if (asked.size > BROAD.maxCapabilities) {
    reasons.push(`it asks for ${asked.size} capabilities (more than ${BROAD.maxCapabilities})`);
  }
  const covered = service.filter((c) => asked.has(c.name)).length;
  if (service.length >= BROAD.minServiceSize && covered >= service.length * BROAD.shareOfService) {
    reasons.push(`it asks for ${covered} of the ${service.length} capabilities this service has`);
  }
  const changing = service.filter((c) => !isReadOnlyMethod(c.method));
  if (changing.length >= BROAD.minDataChanging && changing.every((c) => asked.has(c.name))) {
    reasons.push(`it asks for every capability that can change data (${changing.length})`);
  }
  if (reasons.length === 0) return undefined;
  return {
    kind: 'broad',
    text: `This is an unusually broad request: ${reasons.join('; ')}. Approve only what the agent needs: uncheck the rest.`,
  };
}

/** Every warning for a request, names first. `serviceName`: discovery's provider_name. */
export function requestWarnings(
  ctx: ProtocolContext,
  r: DeviceRequest,
  serviceName: string,
): RequestWarning[] {
  const service = ctx.catalog.capabilities
    .filter((c) => !ctx.policy.blocked.has(c.name))
    .map((c) => ({ name: c.name, method: c.operation.method.toUpperCase() }));
  const broad = broadRequest(r.capabilities, service);
  return [
    ...nameWarnings('agent name', r.agentName, serviceName, ctx.policy.approval.warnNames),
    ...nameWarnings('host name', r.hostName, serviceName, ctx.policy.approval.warnNames),
    ...(broad ? [broad] : []),
  ];
}
