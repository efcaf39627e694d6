/**
 * Redaction across the events of a relayed stream (issue 10, class 12). An upstream that cuts a
 * secret over several events (`data: sk-li` then `data: ve-1234…`) passes any per-event check,
 * yet the agent joins the pieces. So each stream keeps, per channel of text an agent may join, a
 * window of the text already relayed, as long as the longest secret form, and for each new event:
 * - a secret form that ends in this event but began earlier is redacted from this event on;
 * - the event's end that begins a secret form (3 to 8 characters of it, a quarter of the form) is
 *   redacted before it leaves, so at most a few leading characters of a secret reach the agent.
 * Channels: the data of non-JSON events; for JSON events each string member by its path (streams
 * of `{"delta": "…"}` are joined by field); event ids. Beside them, one channel sees all the data
 * in the order it is relayed (each string member and each non-JSON event's data, one after the
 * other), so a secret whose pieces sit in different channels, one after the other, is caught too.
 * JSON data nested deeper than MAX_DEPTH ends the stream: its strings would not be walked.
 *
 * The events are re-written in wire format, so the relay downstream parses a clean stream.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { replaceRanges, type SecretForms } from './secret-forms.js';
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
   * `prefixes`: also withhold an end of `text` that starts a secret form (not for ids, which
   * count up and would end in a short run of a hex form every so often).
   */
  constructor(private readonly prefixes: boolean) {}

  /** `text` with what belongs to a secret redacted, given the text relayed before it. */
  redact(text: string, forms: readonly SecretForms[]): string {
    return replaceRanges(text, this.ranges(text, forms), REDACTED);
  }

  /**
   * Where `text` holds what belongs to a secret, given the text relayed before it; takes `text`
   * into the window as it came (what the agent can join is the text before redaction elsewhere).
   */
  ranges(text: string, forms: readonly SecretForms[]): [number, number][] {
    if (text === '') return [];
    const joined = this.window + text;
    const offset = this.window.length;
    const ranges: [number, number][] = [];
    let longest = 0;
    for (const f of forms) {
      for (const form of f.literal) {
        longest = Math.max(longest, form.length);
        // Whole forms that reach into this event (those inside it alone too).
        const first = Math.max(0, offset - form.length + 1);
        for (let i = joined.indexOf(form, first); i !== -1; i = joined.indexOf(form, i + 1)) {
          ranges.push([Math.max(i, offset), i + form.length]);
        }
        if (this.prefixes) {
          const start = prefixStart(joined, form);
          if (start !== undefined) ranges.push([Math.max(start, offset), joined.length]);
        }
      }
    }
    this.window = joined.slice(Math.max(0, joined.length - Math.max(0, longest - 1)));
    return ranges.filter(([, e]) => e > offset).map(([s, e]) => [s - offset, e - offset]);
  }
}

/** Where the longest end of `text` that begins `form` (and is long enough to count) starts. */
function prefixStart(text: string, form: string): number | undefined {
  const min = Math.min(PREFIX_MAX, Math.max(PREFIX_MIN, Math.floor(form.length / 4)));
  const head = form[0] as string;
  for (
    let p = text.indexOf(head, Math.max(0, text.length - form.length + 1));
    p !== -1 && text.length - p >= min;
    p = text.indexOf(head, p + 1)
  ) {
    if (form.startsWith(text.slice(p))) return p;
  }
  return undefined;
}

/** One relayed stream's channels. */
export class EventRedactor {
  private readonly channels = new Map<string, Channel>();
  /** All the data, in the order it is relayed, across channels. */
  private readonly all = new Channel(true);

  constructor(private readonly forms: Forms) {}

  event(event: SseEvent): SseEvent {
    const forms = this.forms();
    const id = event.id === undefined ? undefined : this.channel('id', false).redact(event.id, forms);
    return { ...event, data: this.data(event.data, forms), ...(id !== undefined ? { id } : {}) };
  }

  private data(data: string, forms: readonly SecretForms[]): string {
    const json = parseJson(data);
    if (json === undefined) return this.redact(data, 'data', forms);
    if (depthExceeds(json.value, MAX_EVENT_DEPTH)) {
      throw new Error(`event stream event nested more than ${MAX_EVENT_DEPTH} levels deep`);
    }
    let changed = false;
    const walk = (value: unknown, path: string): unknown => {
      if (typeof value === 'string') {
        const out = this.redact(value, `json${path}`, forms);
        if (out !== value) changed = true;
        return out;
      }
      if (value === null || typeof value !== 'object') return value;
      if (Array.isArray(value)) return value.map((v, i) => walk(v, `${path}/${i}`));
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = walk(v, `${path}/${k}`);
      return out;
    };
    const redacted = walk(json.value, '');
    return changed ? JSON.stringify(redacted) : data;
  }

  /** `text` redacted by its own channel and by the channel of all the data, both on its text as it came. */
  private redact(text: string, key: string, forms: readonly SecretForms[]): string {
    const ranges = [...this.channel(key).ranges(text, forms), ...this.all.ranges(text, forms)];
    return replaceRanges(text, ranges, REDACTED);
  }

  private channel(key: string, prefixes = true): Channel {
    let channel = this.channels.get(key);
    if (!channel) {
      // Past the bound, further paths share one channel: still redacted, joined less precisely.
      const bounded = this.channels.size < MAX_CHANNELS ? key : 'overflow';
      channel = this.channels.get(bounded) ?? new Channel(prefixes);
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
