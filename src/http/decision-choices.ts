/**
 * Reading the Approve form back (views/decision-form.ts renders it). Form names carry indexes into
 * the request as shown (`cap=2`, `n.2.0.max=10`, `n.2.1.in=3`), never agent-chosen text: the form
 * stays small and any name the page did not render is refused as tampering. The request behind
 * the indexes is the one whose content hash the form carries, so an index always means what the
 * approver saw. checkDecision (src/protocol/decision.ts) then refuses anything wider than the
 * request.
 *
 * The expiry select always sends a value, so its presence tells a POST from this form apart from
 * one carrying only the hidden fields: then no box was unchecked and nothing narrowed, and the
 * whole request as shown is approved (without expiry). With it, a capability or value whose box
 * is absent was unchecked.
 */
import {
  checkDecision,
  type DecisionCheck,
  type DecisionChoices,
  type FieldChoice,
} from '../protocol/decision.js';
import type { DeviceRequest } from '../protocol/device.js';
import { narrowableFields, NO_EXPIRY, type NarrowableField } from './narrowable-fields.js';

export type FormChoices =
  { readonly ok: true; readonly choices: DecisionChoices } | { readonly ok: false; readonly problem: string };

const INDEX = /^\d{1,4}$/;
const NARROW_NAME = /^n\.(\d{1,4})\.(\d{1,4})\.(min|max|in)$/;
const TAMPERED =
  'You can only narrow what the agent asked for, never widen it: this form names something the request does not have.';

/** The approver's choices from an Approve POST, in the request's own names (see the header). */
export function readDecisionForm(form: URLSearchParams, r: DeviceRequest): FormChoices {
  const names = r.capabilities.map((c) => c.name);
  const expires = form.get('expires');
  if (expires === null)
    return { ok: true, choices: { capabilities: names, narrowing: new Map(), grantLifetime: null } };

  const capabilities: string[] = [];
  for (const value of form.getAll('cap')) {
    const name = INDEX.test(value) ? names[Number(value)] : undefined;
    if (name === undefined) return { ok: false, problem: TAMPERED };
    capabilities.push(name);
  }

  const narrowable = narrowableFields(r);
  const choices = new Map<NarrowableField, { min?: number; max?: number; in: unknown[] }>(
    narrowable.map((f) => [f, { in: [] }]),
  );
  for (const [key, value] of form) {
    if (!key.startsWith('n.')) continue;
    const m = NARROW_NAME.exec(key);
    const f = m ? narrowable.find((n) => n.cap === Number(m[1]) && n.index === Number(m[2])) : undefined;
    const choice = f ? choices.get(f) : undefined;
    if (!m || !f || !choice) return { ok: false, problem: TAMPERED };
    if (m[3] === 'in') {
      const listed = INDEX.test(value) && f.values ? f.values[Number(value)] : undefined;
      if (listed === undefined) return { ok: false, problem: TAMPERED };
      choice.in.push(listed);
      continue;
    }
    if (!f.range) return { ok: false, problem: TAMPERED };
    if (value.trim() === '') continue;
    const bound = Number(value);
    if (!Number.isFinite(bound)) {
      return { ok: false, problem: `The limit for ${names[f.cap] ?? ''}, ${f.field} must be a number.` };
    }
    choice[m[3] as 'min' | 'max'] = bound;
  }

  const narrowing = new Map<string, Map<string, FieldChoice>>();
  for (const [f, choice] of choices) {
    const capability = names[f.cap] as string;
    const fields = narrowing.get(capability) ?? new Map<string, FieldChoice>();
    fields.set(f.field, {
      ...(choice.min !== undefined ? { min: choice.min } : {}),
      ...(choice.max !== undefined ? { max: choice.max } : {}),
      // Rendered as checkboxes: those left unchecked are not allowed.
      ...(f.values ? { in: choice.in } : {}),
    });
    narrowing.set(capability, fields);
  }
  return {
    ok: true,
    choices: { capabilities, narrowing, grantLifetime: expires === NO_EXPIRY ? null : expires.slice(0, 16) },
  };
}

/** Reads the Approve POST and checks it against the request as shown: what approve() is given. */
export function approverChoice(form: URLSearchParams, r: DeviceRequest): DecisionCheck {
  const read = readDecisionForm(form, r);
  return read.ok ? checkDecision(r, read.choices) : read;
}
