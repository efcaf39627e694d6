/**
 * Which constrained fields of a request the decision form lets the approver narrow, and how:
 * shared by the form (views/decision-form.ts) and by reading it back (decision-choices.ts), so
 * that an index in a POST means exactly the field the page rendered for it.
 */
import type { DeviceRequest } from '../protocol/device.js';

/**
 * How much narrowing the form offers: at most `fields` constrained fields in a request get inputs,
 * and an `in` list gets checkboxes only up to `values` values. Other limits are shown and kept
 * as asked. This keeps the POST well under the 8 KiB form limit (steps/page.ts).
 */
export const NARROWING_BOUNDS = { fields: 16, values: 12 } as const;

/** The form value of "no expiry of their own". */
export const NO_EXPIRY = 'never';

export interface NarrowableField {
  readonly cap: number;
  readonly index: number;
  readonly field: string;
  readonly min?: number;
  readonly max?: number;
  /** Whether the range (min/max) gets inputs. */
  readonly range: boolean;
  /** The `in` values, when they get checkboxes. */
  readonly values: readonly unknown[] | null;
}

function isObject(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The fields the form lets the approver narrow, in request order, within NARROWING_BOUNDS. */
export function narrowableFields(r: DeviceRequest): NarrowableField[] {
  const out: NarrowableField[] = [];
  r.capabilities.forEach((c, cap) => {
    Object.entries(c.constraints ?? {}).forEach(([field, asked], index) => {
      if (!isObject(asked) || out.length >= NARROWING_BOUNDS.fields) return;
      const min = typeof asked.min === 'number' ? asked.min : undefined;
      const max = typeof asked.max === 'number' ? asked.max : undefined;
      const list = Array.isArray(asked.in) ? (asked.in as unknown[]) : null;
      const values = list && list.length <= NARROWING_BOUNDS.values ? list : null;
      const range = min !== undefined || max !== undefined;
      if (!range && values === null) return;
      out.push({
        cap,
        index,
        field,
        ...(min !== undefined ? { min } : {}),
        ...(max !== undefined ? { max } : {}),
        range,
        values,
      });
    });
  });
  return out;
}
