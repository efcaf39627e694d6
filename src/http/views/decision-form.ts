/**
 * The approver's choices inside the Approve form, and reading them back from the POST:
 *
 *  - one checkbox per requested capability, all checked (uncheck = partial approval);
 *  - per constrained field, inputs that can only narrow: "at least"/"at most" for a range, one
 *    checkbox per allowed value for an `in` list (bounded: NARROWING_BOUNDS);
 *  - a select for how long the approved grants last (GRANT_LIFETIMES).
 *
 * Form names carry indexes into the request as shown; ../decision-choices.ts reads them back.
 */
import type { Decision } from '../../protocol/approval-decisions.js';
import { GRANT_LIFETIMES } from '../../protocol/decision.js';
import type { DeviceRequest } from '../../protocol/device.js';
import { DISPLAY_LIMITS, plainText } from '../../protocol/display-text.js';
import { escapeHtml } from '../html.js';
import { narrowableFields, NO_EXPIRY, type NarrowableField } from '../narrowable-fields.js';

function isObject(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A constraint value as plain text: strings quoted, others as JSON; capped (§8.10). */
export function valueText(value: unknown): string {
  const text = typeof value === 'string' ? `“${value}”` : (JSON.stringify(value) ?? String(value));
  return plainText(text, DISPLAY_LIMITS.constraintValue).text;
}

/** One constraint as a sentence fragment: `limit: at most 10`, `status: one of “a”, “b”`. */
export function constraintText(field: string, value: unknown): string {
  const name = plainText(field, DISPLAY_LIMITS.constraintValue).text;
  if (!isObject(value)) return `${name}: exactly ${valueText(value)}`;
  const parts: string[] = [];
  if (typeof value.min === 'number') parts.push(`at least ${value.min}`);
  if (typeof value.max === 'number') parts.push(`at most ${value.max}`);
  if (Array.isArray(value.in)) parts.push(`one of ${value.in.map(valueText).join(', ')}`);
  if (Array.isArray(value.not_in)) parts.push(`none of ${value.not_in.map(valueText).join(', ')}`);
  return `${name}: ${parts.join('; ')}`;
}

function rangeInputs(f: NarrowableField): string {
  const id = `n-${f.cap}-${f.index}`;
  const name = `n.${f.cap}.${f.index}`;
  const bounds = `${f.min !== undefined ? ` min="${f.min}"` : ''}${f.max !== undefined ? ` max="${f.max}"` : ''}`;
  const input = (op: 'min' | 'max', label: string): string =>
    `<span class="bound"><label for="${id}-${op}">${label}</label>
<input id="${id}-${op}" name="${name}.${op}" type="number" step="any" inputmode="decimal"${bounds} value="${f[op] ?? ''}"></span>`;
  return `${input('min', 'At least')}
${input('max', 'At most')}`;
}

function valueBoxes(f: NarrowableField): string {
  return (f.values ?? [])
    .map((value, k) => {
      const id = `n-${f.cap}-${f.index}-in-${k}`;
      return `<span class="value"><input type="checkbox" id="${id}" name="n.${f.cap}.${f.index}.in" value="${k}" checked> <label for="${id}">${escapeHtml(valueText(value))}</label></span>`;
    })
    .join('\n');
}

/** The choices inside the Approve form (see the header). */
export function decisionControls(r: DeviceRequest): string {
  const narrowable = narrowableFields(r);
  const blocks = r.capabilities.map((c, cap) => {
    const fields = narrowable.filter((f) => f.cap === cap);
    const kept = Object.entries(c.constraints ?? {})
      .filter(([field]) => !fields.some((f) => f.field === field))
      .map(([field, value]) => `<li>${escapeHtml(constraintText(field, value))} (as asked)</li>`);
    const narrowing = fields.map(
      (f) => `<fieldset class="narrow">
<legend>Limit <code>${escapeHtml(plainText(f.field, DISPLAY_LIMITS.constraintValue).text)}</code> <small>(you can only tighten it)</small></legend>
${f.range ? rangeInputs(f) : ''}
${f.values ? valueBoxes(f) : ''}
</fieldset>`,
    );
    return `<div class="choice">
<input type="checkbox" name="cap" value="${cap}" id="cap-${cap}" checked>
<label for="cap-${cap}" class="inline"><code>${escapeHtml(plainText(c.name, DISPLAY_LIMITS.name).text)}</code>${c.method ? ` <small class="method">(${escapeHtml(c.method)})</small>` : ''}</label>
${kept.length ? `<ul class="kept">${kept.join('')}</ul>` : ''}
${narrowing.join('\n')}
</div>`;
  });
  const lifetimes = GRANT_LIFETIMES.map((l) => `<option value="${l.key}">After ${l.label}</option>`).join(
    '\n',
  );
  return `${
    r.capabilities.length
      ? `<fieldset id="choices">
<legend>What you allow</legend>
<p class="hint">Uncheck what the agent should not get; limits can only be made tighter.</p>
${blocks.join('\n')}
</fieldset>`
      : ''
  }
<label for="grant-expiry">Access ends</label>
<select id="grant-expiry" name="expires">
<option value="${NO_EXPIRY}" selected>Only when revoked (no expiry of its own)</option>
${lifetimes}
</select>`;
}

/** The outcome sentence after an approval: what was granted, denied, narrowed, and until when. */
export function approvedText(r: DeviceRequest, d: Decision): string {
  const agent = plainText(r.agentName, DISPLAY_LIMITS.name).text;
  const parts = [
    `Approved. The agent ${agent} may now use: ${d.approved.length ? d.approved.join(', ') : 'no capabilities'}.`,
  ];
  if (d.denied.length) parts.push(`Not approved: ${d.denied.join(', ')}.`);
  if (d.grantsExpireAt !== null)
    parts.push(`This access ends at ${new Date(d.grantsExpireAt).toISOString()}.`);
  parts.push('You can close this page.');
  return parts.join(' ');
}
