/**
 * The HTML of a per-call approval (issue 16 §1): the page at `{issuer}/approvals/calls/{id}` and
 * its card in the inbox. "What you see is what you sign": each argument is shown exactly as it
 * will be sent, escaped, with its input-schema description; invisible characters are made
 * visible (`\u{202E}`) rather than removed, so the text shown cannot differ from the value run.
 * Every value is drawn left to right in the order of its characters (`<bdo dir="ltr">`): without
 * it, right-to-left letters reorder what is around them with no control character at all (a
 * Hebrew paseq `׀`, which looks like `|`, shows `DE89׀ 1111 2222 3333` as `3333 2222 1111 |`).
 * Values with right-to-left letters or words that mix alphabets (`асct-42`, Cyrillic `а` and `с`)
 * are flagged beside them. Long values are folded in a `<details>` (no script needed) that shows
 * them in full.
 */
import { propertySchema } from '../../openapi/local-ref.js';
import type { Capability } from '../../openapi/types.js';
import { DISPLAY_LIMITS, plainText } from '../../protocol/display-text.js';
import type { PerCallRecord, SessionRecord } from '../../storage/types.js';
import { mixedScriptWords } from '../../protocol/name-warnings.js';
import type { RequestWarning } from '../../protocol/request-warnings.js';
import { escapeHtml } from '../html.js';
import { warningList } from './device.js';
import { PASSKEY_SCRIPT_TAG, PASSKEY_STATUS } from './passkey-script.js';

/** Characters of a value shown before it is folded. */
export const FOLD_AT = 160;

/** Who asks: names the agent chose (§8.10: plain, capped), the capability from the catalog. */
export interface PerCallParties {
  readonly agentName: string;
  readonly hostName: string | null;
  readonly capability: Capability | undefined;
  /** What the names warn of (§8.10), as on the other approval pages. */
  readonly warnings: readonly RequestWarning[];
}

// Control and format characters (bidi overrides, zero-width joiners…) other than line breaks.
const INVISIBLE = /(?![\n\t])[\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}\u2028\u2029]/gu;

function visible(text: string): { text: string; invisible: boolean } {
  let invisible = false;
  const shown = text.replace(INVISIBLE, (c) => {
    invisible = true;
    return `\\u{${(c.codePointAt(0) ?? 0).toString(16).toUpperCase()}}`;
  });
  return { text: shown, invisible };
}

/**
 * Letters of the right-to-left scripts (bidi classes R and AL, and Arabic digits, AN): the Hebrew,
 * Arabic, Syriac, Thaana, N'Ko, Samaritan and Mandaic blocks, their presentation forms, and the
 * right-to-left blocks of the supplementary planes.
 */
const RIGHT_TO_LEFT = /[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefe\u{10800}-\u{10fff}\u{1e800}-\u{1efff}]/u;
// eslint-disable-next-line no-control-regex -- every ASCII character, controls included
const ASCII_ONLY = /^[\x00-\x7f]*$/;
/** Words named in a mixed-alphabet warning: enough to find them. */
const MIXED_WORDS_NAMED = 3;

/** What a value's text holds that may not read as it is sent, one sentence (HTML) each. */
function valueRisks(raw: string, invisible: boolean): string[] {
  const risks: string[] = [];
  if (invisible) risks.push('Contains invisible characters, shown here as <code>\\u{…}</code>.');
  if (ASCII_ONLY.test(raw)) return risks;
  if (RIGHT_TO_LEFT.test(raw)) {
    risks.push(
      'Contains right-to-left letters: shown here left to right, in the order they are sent, which may not be how they usually read.',
    );
  }
  const mixed = mixedScriptWords(raw).slice(0, MIXED_WORDS_NAMED);
  if (mixed.length > 0) {
    const words = mixed.map(
      (m) =>
        `<bdo dir="ltr"><code>${escapeHtml(visible(m.word).text)}</code></bdo> (${escapeHtml(m.scripts.join(', '))})`,
    );
    risks.push(
      `Mixes alphabets in ${words.join(', ')}: letters that look alike are different characters to the service.`,
    );
  }
  return risks;
}

/** A value's text, drawn left to right in the order of its characters. */
function inOrder(text: string): string {
  return `<bdo dir="ltr">${escapeHtml(text)}</bdo>`;
}

function valueHtml(value: unknown, field: string): string {
  const raw = typeof value === 'string' ? value : (JSON.stringify(value, null, 2) ?? 'null');
  const { text, invisible } = visible(raw);
  const kind = typeof value === 'string' ? 'text' : Array.isArray(value) ? 'list' : typeof value;
  const warn = valueRisks(raw, invisible)
    .map((risk) => `<p class="risk">${risk}</p>`)
    .join('');
  const chars = Array.from(text);
  if (chars.length <= FOLD_AT) {
    return `<pre class="value" data-kind="${kind}">${inOrder(text)}</pre>${warn}`;
  }
  return `<pre class="value" data-kind="${kind}">${inOrder(chars.slice(0, FOLD_AT).join(''))}…</pre>
<details id="all-${escapeHtml(field)}" data-folded><summary>Show all ${chars.length} characters</summary>
<pre class="value">${inOrder(text)}</pre></details>${warn}`;
}

/** The input fields in schema order, then any others the agent sent (the schema allowed them). */
function fieldsOf(capability: Capability | undefined, args: Readonly<Record<string, unknown>>): string[] {
  const properties = capability?.input?.properties;
  const declared = typeof properties === 'object' && properties !== null ? Object.keys(properties) : [];
  return [...declared.filter((f) => f in args), ...Object.keys(args).filter((f) => !declared.includes(f))];
}

function descriptionOf(capability: Capability | undefined, field: string): string | undefined {
  const description = propertySchema(capability?.input, field)?.description;
  return typeof description === 'string'
    ? plainText(description, DISPLAY_LIMITS.description).text
    : undefined;
}

/** Every argument: field, its description, the value. */
export function argumentsList(r: PerCallRecord, capability: Capability | undefined): string {
  const fields = fieldsOf(capability, r.arguments);
  if (fields.length === 0) return '<p id="arguments">No arguments.</p>';
  const items = fields.map((f) => {
    const description = descriptionOf(capability, f);
    return `<dt><code>${escapeHtml(f)}</code></dt>
<dd>${description ? `<div class="hint">${escapeHtml(description)}</div>` : ''}${valueHtml(r.arguments[f], f)}</dd>`;
  });
  return `<dl id="arguments">\n${items.join('\n')}\n</dl>`;
}

function timeLeft(expiresAt: number, now: number): string {
  const minutes = Math.max(1, Math.ceil((expiresAt - now) / 60_000));
  return `${minutes === 1 ? '1 minute' : `${minutes} minutes`} left to decide (until ${new Date(expiresAt).toISOString()})`;
}

function who(p: PerCallParties): string {
  const plain = (text: string): string => escapeHtml(plainText(text, DISPLAY_LIMITS.name).text);
  return `<strong class="agent">${plain(p.agentName)}</strong>${p.hostName ? ` on <strong>${plain(p.hostName)}</strong>` : ''}`;
}

/** What is asked, for the page and (shorter) the card. */
export function callSummary(r: PerCallRecord, p: PerCallParties): string {
  const op = p.capability?.operation;
  const description = p.capability?.description.split('\n')[0]?.trim();
  return `<p>The AI agent ${who(p)} asks to run <code>${escapeHtml(r.capability)}</code>${
    op ? ` <small class="method">(${escapeHtml(op.method.toUpperCase())} ${escapeHtml(op.path)})</small>` : ''
  } once, with the arguments below.${description ? ` ${escapeHtml(plainText(description, DISPLAY_LIMITS.description).text)}.` : ''}</p>`;
}

export type PasskeyState = 'ready' | 'no-passkey' | 'unavailable';

/** The page: what is asked, the arguments, the time left, Approve (passkey) and Deny. */
export function perCallView(
  r: PerCallRecord,
  p: PerCallParties,
  s: SessionRecord,
  hash: string,
  state: PasskeyState,
  now: number,
): string {
  const base = `/approvals/calls/${encodeURIComponent(r.id)}`;
  const hidden = `<input type="hidden" name="csrf" value="${escapeHtml(s.csrfToken)}">
<input type="hidden" name="shown" value="${escapeHtml(hash)}">`;
  const approve =
    state === 'ready'
      ? `<form id="approve-form" method="post" action="${base}/approve" data-passkey="assert" data-unfold-first data-options="${base}/passkey-options" data-waiting="Confirm with your passkey to run this call…">
${hidden}
<button type="submit" class="approve">Approve with your passkey</button>
</form>
${PASSKEY_STATUS}
${PASSKEY_SCRIPT_TAG}`
      : `<p class="notice" id="passkey-required" role="status">Approving a call needs your passkey (fingerprint, face or PIN), and ${
          state === 'no-passkey'
            ? 'you have no passkey yet: <a href="/account">add one on your account page</a>, then open this request again.'
            : "passkeys cannot be used at this server's address (browsers allow them only on https or http://localhost)."
        } You can still deny it.</p>`;
  return `<section id="call" aria-labelledby="call-title">
<h2 id="call-title">Approve one call</h2>
${warningList(p.warnings)}
${callSummary(r, p)}
<p class="notice">Nothing has been sent yet. If you approve, it runs once, with exactly these arguments; your passkey confirms exactly what this page shows.</p>
<h3 id="arguments-title">Arguments</h3>
${argumentsList(r, p.capability)}
<p class="who" id="time-left">${timeLeft(r.expiresAt, now)}.</p>
<p class="who">Content hash <code id="shown-hash">${escapeHtml(hash)}</code></p>
</section>
${approve}
<form id="deny-form" method="post" action="${base}/deny">
${hidden}
<label for="deny-reason">Why you deny it (optional)</label>
<input id="deny-reason" name="reason" maxlength="500" autocomplete="off">
<button type="submit" class="deny">Deny</button>
</form>`;
}

/** One inbox card: agent, capability, the first arguments, time left, and the way to the page. */
export function perCallCard(r: PerCallRecord, p: PerCallParties, now: number): string {
  const fields = fieldsOf(p.capability, r.arguments).slice(0, 3);
  const brief = fields.map((f) => {
    const raw = r.arguments[f];
    const text = visible(typeof raw === 'string' ? raw : (JSON.stringify(raw) ?? 'null')).text;
    const chars = Array.from(text);
    return `<li><code>${escapeHtml(f)}</code>: ${inOrder(chars.length > 60 ? `${chars.slice(0, 60).join('')}…` : text)}</li>`;
  });
  const more = Object.keys(r.arguments).length - fields.length;
  const risky = Object.values(r.arguments).filter((value) => {
    const raw = typeof value === 'string' ? value : (JSON.stringify(value) ?? 'null');
    return valueRisks(raw, visible(raw).invisible).length > 0;
  }).length;
  const warned = p.warnings.length + risky;
  return `<li class="card" id="call-${escapeHtml(r.id)}">
${callSummary(r, p)}
${warned > 0 ? `<p class="risk">${warned === 1 ? '1 warning' : `${warned} warnings`}: review it carefully.</p>` : ''}
${brief.length ? `<ul class="kept">${brief.join('')}${more > 0 ? `<li>and ${more} more</li>` : ''}</ul>` : ''}
<p class="who">${timeLeft(r.expiresAt, now)}.</p>
<p><a class="button" href="/approvals/calls/${encodeURIComponent(r.id)}">Review the arguments and decide</a></p>
</li>`;
}

/** The inbox section of calls waiting for the signed-in user. */
export function perCallSection(cards: readonly string[], more: boolean): string {
  if (cards.length === 0) return '';
  return `<h2 id="calls-title">Calls waiting for your approval</h2>
<ul id="calls" class="cards">
${cards.join('\n')}
</ul>${
    more
      ? `\n<p class="notice" id="calls-more">More calls are waiting than the ${cards.length} newest shown here: decide or deny these to see the rest.</p>`
      : ''
  }`;
}
