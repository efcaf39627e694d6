/**
 * Redaction across the events of a relayed stream (issue 10, class 12). An upstream that cuts a
 * secret over several events (`data: sk-li` then `data: ve-1234…`) passes any per-event check,
 * yet the agent joins the pieces. So each stream keeps, per channel of text an agent may join, a
 * window of the text already relayed, as long as the longest secret form, and for each new event:
 * - a secret form that ends in this event but began earlier is redacted from this event on;
 * - the event's end that begins a secret form (3 to 8 characters of it, a quarter of the form) is
 *   redacted before it leaves, so at most a few leading characters of a secret reach the agent.
 * Both are also looked for in the joined text with its escapes decoded (secret-forms.ts views),
 * so `%73k-li` then `ve-…` is caught too; where escapes are, the window keeps the characters the
 * last bytes of the longest form decode from.
 * Channels: the data of non-JSON events; for JSON events each string member by its path (streams
 * of `{"delta": "…"}` are joined by field), the keys of each object by its path, and numbers,
 * booleans and null as written, with the strings of their path; event ids. Beside them, two
 * channels see the text of every channel in the order it is relayed, so a secret whose pieces sit
 * in different channels, one after the other, is caught too: one the data's values alone (each
 * member, or a non-JSON event's data), one everything (each event's id, then its keys and values).
 * JSON data nested deeper than MAX_DEPTH ends the stream: its strings would not be walked.
 *
 * The events are re-written in wire format, so the relay downstream parses a clean stream.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { escapeViews, replaceRanges, type SecretForms, type View } from './secret-forms.js';
import { REDACTED } from './redaction.js';
import { SseParser, type SseEvent } from './sse.js';
import { depthExceeds } from '../util/json-depth.js';

// Fewer leading characters than this of a secret form are relayed as they are (ordinary text ends
// in short prefixes of secrets all the time): a quarter of the form, between 3 and 8 characters.
const PREFIX_MIN = 3;
const PREFIX_MAX = 8;
// Bounds what one stream keeps: channels (JSON paths), and how deep JSON data is walked (an event
// nested deeper ends the stream with an error, like an event over its size bound).
const MAX_CHANNELS = 64;
export const MAX_EVENT_DEPTH = 64;

type Forms = () => readonly SecretForms[];

class Channel {
  private window = '';

  /**
   * Where `text` holds what belongs to a secret, given the text relayed before it; takes `text`
   * into the window as it came (what the agent can join is the text before redaction elsewhere).
   */
  ranges(text: string, forms: Prepared): [number, number][] {
    if (text === '') return [];
    const joined = this.window + text;
    const offset = this.window.length;
    const found: [number, number][] = [];
    const keepFrom = Math.min(
      literalRanges(joined, offset, forms, found),
      escapedRanges(joined, forms, found),
    );
    this.window = joined.slice(Math.max(0, keepFrom));
    const out: [number, number][] = [];
    for (const [s, e] of found) if (e > offset) out.push([Math.max(s, offset) - offset, e - offset]);
    return out;
  }
}

/** One form as the channels search it, worked out once per set of forms. */
interface Form {
  readonly text: string;
  /** How many of its first characters an end of text must hold to be withheld. */
  readonly min: number;
}

/** Every secret's literal and byte-view forms, flat, with the longest of each. */
interface Prepared {
  readonly literal: readonly Form[];
  readonly bytes: readonly Form[];
  readonly longestLiteral: number;
  readonly longestBytes: number;
}

const prepared = new WeakMap<readonly SecretForms[], Prepared>();

/** The forms of `secrets` as the channels search them (the same array gives the same answer). */
function prepare(secrets: readonly SecretForms[]): Prepared {
  let out = prepared.get(secrets);
  if (out === undefined) {
    const form = (text: string): Form => ({
      text,
      min: Math.min(PREFIX_MAX, Math.max(PREFIX_MIN, Math.floor(text.length / 4))),
    });
    const literal = secrets.flatMap((f) => f.literal.map(form));
    const bytes = secrets.flatMap((f) => f.bytes.map(form));
    const longest = (forms: readonly Form[]): number => Math.max(0, ...forms.map((f) => f.text.length));
    out = { literal, bytes, longestLiteral: longest(literal), longestBytes: longest(bytes) };
    prepared.set(secrets, out);
  }
  return out;
}

/**
 * Adds to `found` the literal forms in `joined` that reach past `offset` and an end of it that
 * begins one; returns where the window to keep starts (the longest form less one character).
 */
function literalRanges(joined: string, offset: number, forms: Prepared, found: [number, number][]): number {
  // An escape cut at the end (`sk-live%2`, then `D0123…`) hides what is before it from the
  // prefix check until it completes, so prefixes are also looked for before it.
  const cut = joined.length - partialEscapeLength(joined);
  for (const { text: form, min } of forms.literal) {
    // Whole forms that reach into this event (those inside it alone too).
    const first = Math.max(0, offset - form.length + 1);
    for (let i = joined.indexOf(form, first); i !== -1; i = joined.indexOf(form, i + 1)) {
      found.push([i, i + form.length]);
    }
    const start =
      prefixStart(joined, joined.length, form, min) ??
      (cut < joined.length ? prefixStart(joined, cut, form, min) : undefined);
    if (start !== undefined) found.push([start, joined.length]);
  }
  return joined.length - (forms.longestLiteral - 1);
}

/**
 * Escaped pieces (`%73k-li` then `ve-…`): adds to `found` where the decoded views of `joined` hold
 * a whole byte form, or end (before an unfinished escape, which the next round or event would
 * complete) in the first characters of one; both mapped back to the characters of `joined`.
 * Returns where the characters of the views' last bytes that may begin a form start.
 */
function escapedRanges(joined: string, forms: Prepared, found: [number, number][]): number {
  let keepFrom = joined.length;
  let cut = joined.length - partialEscapeLength(joined);
  let input: View | undefined;
  for (const view of escapeViews(joined)) {
    const { text, starts, ends } = view;
    // A view's input that ends in an unfinished escape (`%25` decodes to `%`) cuts this one too.
    if (input !== undefined) {
      const k = partialEscapeLength(input.text);
      if (k > 0) cut = Math.min(cut, input.starts[input.text.length - k] as number);
    }
    let usable = text.length - partialEscapeLength(text);
    while (usable > 0 && (starts[usable - 1] as number) >= cut) usable--;
    for (const { text: form, min } of forms.bytes) {
      for (let i = text.indexOf(form); i !== -1; i = text.indexOf(form, i + 1)) {
        found.push([starts[i] as number, ends[i + form.length - 1] as number]);
      }
      const p =
        prefixStart(text, text.length, form, min) ??
        (usable < text.length ? prefixStart(text, usable, form, min) : undefined);
      if (p !== undefined) found.push([starts[p] as number, joined.length]);
    }
    const last = Math.max(0, text.length - (forms.longestBytes - 1));
    if (last < text.length) keepFrom = Math.min(keepFrom, starts[last] as number);
    input = view;
  }
  return keepFrom;
}

// An escape begun at the end of a text and not complete yet: `%`, `%7`, `\`, `\u00`, `\x7`.
const PARTIAL_ESCAPE = /(?:%[0-9A-Fa-f]?|\\(?:u[0-9A-Fa-f]{0,3}|x[0-9A-Fa-f]?)?)$/;

/** How many characters at the end of `text` are an escape not complete yet (0: none). */
function partialEscapeLength(text: string): number {
  // The longest is `\u` and three hex digits: only the end is looked at, and only when it holds
  // a `%` or a backslash (most text ends in neither).
  let escapes = false;
  for (let i = Math.max(0, text.length - 5); i < text.length && !escapes; i++) {
    const c = text.charCodeAt(i);
    escapes = c === 0x25 || c === 0x5c;
  }
  return escapes ? (PARTIAL_ESCAPE.exec(text.slice(-5))?.[0].length ?? 0) : 0;
}

/**
 * Where the longest end of `text.slice(0, end)` that begins `form` (at least `min` characters of
 * it) starts; compared in place, since most texts are searched for every form.
 */
function prefixStart(text: string, end: number, form: string, min: number): number | undefined {
  const head = form[0] as string;
  for (
    let p = text.indexOf(head, Math.max(0, end - form.length + 1));
    p !== -1 && end - p >= min;
    p = text.indexOf(head, p + 1)
  ) {
    let i = 1;
    while (p + i < end && text.charCodeAt(p + i) === form.charCodeAt(i)) i++;
    if (p + i === end) return p;
  }
  return undefined;
}

/** One relayed stream's channels. */
export class EventRedactor {
  private readonly channels = new Map<string, Channel>();
  /** All the data's values (strings and scalars), in the order they are relayed, across channels. */
  private readonly values = new Channel();
  /** Everything an agent reads, in wire order: each event's id, then its data's keys and values. */
  private readonly wire = new Channel();

  constructor(private readonly forms: Forms) {}

  event(event: SseEvent): SseEvent {
    const forms = prepare(this.forms());
    // The id line comes before the data in the wire format, so it joins the data in that order.
    const id = event.id === undefined ? undefined : this.redact(event.id, 'id', forms, false);
    return { ...event, ...(id !== undefined ? { id } : {}), data: this.data(event.data, forms) };
  }

  private data(data: string, forms: Prepared): string {
    const json = parseJson(data);
    if (json === undefined) return this.redact(data, 'data', forms);
    if (depthExceeds(json.value, MAX_EVENT_DEPTH)) {
      throw new Error(`event stream event nested more than ${MAX_EVENT_DEPTH} levels deep`);
    }
    let changed = false;
    // Every token an agent reads in the event's JSON is text it may join: string values, object
    // keys (`{"sk-live-ab": 1}`), and numbers, booleans and null as they are written.
    const text = (value: string, key: string, isValue = true): string => {
      const out = this.redact(value, key, forms, isValue);
      if (out !== value) changed = true;
      return out;
    };
    const walk = (value: unknown, path: string): unknown => {
      if (typeof value === 'string') return text(value, `json${path}`);
      if (value === null || typeof value !== 'object') {
        const written = JSON.stringify(value);
        // A scalar cannot be cut: one that holds part of a secret is replaced whole.
        return text(written, `json${path}`) === written ? value : REDACTED;
      }
      if (Array.isArray(value)) return value.map((v, i) => walk(v, `${path}/${i}`));
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[text(k, `key${path}`, false)] = walk(v, `${path}/${k}`);
      return out;
    };
    const redacted = walk(json.value, '');
    return changed ? JSON.stringify(redacted) : data;
  }

  /**
   * `text` redacted by its own channel, the wire channel and, for a value of the data, the values
   * channel, each on its text as it came. Keys and ids stay out of the values channel: between two
   * pieces of a secret in the data, they would hide the join an agent reading the values makes.
   */
  private redact(text: string, key: string, forms: Prepared, isValue = true): string {
    const ranges = [...this.channel(key).ranges(text, forms), ...this.wire.ranges(text, forms)];
    if (isValue) ranges.push(...this.values.ranges(text, forms));
    return replaceRanges(text, ranges, REDACTED);
  }

  private channel(key: string): Channel {
    let channel = this.channels.get(key);
    if (!channel) {
      // Past the bound, further paths share one channel: still redacted, joined less precisely.
      const bounded = this.channels.size < MAX_CHANNELS ? key : 'overflow';
      channel = this.channels.get(bounded) ?? new Channel();
      this.channels.set(bounded, channel);
    }
    return channel;
  }
}

function parseJson(data: string): { value: unknown } | undefined {
  const first = data.trimStart()[0];
  if (first !== '{' && first !== '[' && first !== '"') return undefined;
  try {
    return { value: JSON.parse(data) };
  } catch {
    return undefined;
  }
}

/**
 * A transform from the upstream's event-stream bytes to the same events with every secret
 * redacted across them, re-written in wire format (comments and `retry` fields are dropped; the
 * relay ignores them).
 */
export function redactEventStream(forms: Forms): Transform {
  const parser = new SseParser();
  const redactor = new EventRedactor(forms);
  const decoder = new TextDecoder('utf-8');
  const write = (t: Transform, events: SseEvent[]): void => {
    for (const e of events) t.push(Buffer.from(wireFormat(redactor.event(e)), 'utf8'));
  };
  return new Transform({
    transform(chunk: Buffer, _encoding, callback: TransformCallback): void {
      try {
        write(this, parser.push(decoder.decode(chunk, { stream: true })));
        callback();
      } catch (err) {
        callback(err as Error);
      }
    },
    flush(callback: TransformCallback): void {
      try {
        write(this, parser.push(decoder.decode()));
        callback();
      } catch (err) {
        callback(err as Error);
      }
    },
  });
}

function wireFormat(event: SseEvent): string {
  const lines = event.data.split(/\r\n|\r|\n/).map((l) => `data: ${l}`);
  const id = event.id !== undefined ? `id: ${event.id.replace(/[\r\n]/g, '')}\n` : '';
  const name = event.event !== undefined ? `event: ${event.event.replace(/[\r\n]/g, '')}\n` : '';
  return `${name}${id}${lines.join('\n')}\n\n`;
}
