/**
 * What one request may ask the proxy to store (policy `capability_requests`): how many entries a
 * capabilities list has (§5.3, §5.4), and how large and how deeply nested the constraints it
 * proposes are (§2.13). Checked before anything is parsed further or written, for every host,
 * approved or not: a registration from a key nobody knows is stored (pending) before any human
 * looks at it. Each refusal is a 400 naming the policy key and its value.
 */
import { ProtocolError } from '../errors.js';
import type { Policy } from './resolved-policy.js';

type Limits = Policy['capabilityRequests'];

function tooMuch(limit: string, maximum: number, message: string): ProtocolError {
  return new ProtocolError('invalid_request', `${message} (policy ${limit} = ${maximum}).`, {
    fields: { limit, maximum },
  });
}

/** Throws unless `raw` (an array already) is within the entry, depth and byte bounds. */
export function checkCapabilityList(raw: readonly unknown[], field: string, limits: Limits): void {
  if (raw.length > limits.maxEntries) {
    throw tooMuch(
      'capability_requests.max_entries',
      limits.maxEntries,
      `${field} lists ${raw.length} entries, more than one request may ask for`,
    );
  }
  let bytes = 0;
  raw.forEach((entry, i) => {
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) return;
    if (!Object.hasOwn(entry, 'constraints')) return;
    const constraints = (entry as { constraints?: unknown }).constraints;
    // The constraints object itself is the outer level; each field's value nests below it.
    if (deeperThan(constraints, limits.maxConstraintDepth + 1)) {
      throw tooMuch(
        'capability_requests.max_constraint_depth',
        limits.maxConstraintDepth,
        `${field}[${i}].constraints nests deeper than a constraint value may`,
      );
    }
    // Depth is bounded now, so serializing cannot exhaust the stack.
    bytes += Buffer.byteLength(JSON.stringify(constraints) ?? '', 'utf8');
    if (bytes > limits.maxConstraintBytes) {
      throw tooMuch(
        'capability_requests.max_constraint_bytes',
        limits.maxConstraintBytes,
        `The constraints proposed in ${field} exceed ${limits.maxConstraintBytes} bytes of JSON`,
      );
    }
  });
}

/**
 * Whether `value` has more than `max` levels of arrays and objects (a scalar has 0, `[]` and `{}`
 * have 1). The walk never goes below `max + 1` levels, whatever the input.
 */
export function deeperThan(value: unknown, max: number): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (max <= 0) return true;
  const children: unknown[] = Array.isArray(value) ? value : Object.values(value);
  return children.some((child) => deeperThan(child, max - 1));
}
