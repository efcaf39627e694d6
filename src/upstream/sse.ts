/**
 * Server-Sent Events, both ways: a parser for the upstream's stream (WHATWG HTML "event stream
 * interpretation", enough of it for relaying) and the writer for the §5.11 events the proxy
 * sends: `data`, `error` and `done`.
 */

export interface SseEvent {
  /** The `event:` field; absent means the default (`message` upstream, `data` in §5.11). */
  readonly event?: string;
  readonly data: string;
  readonly id?: string;
}

// A line longer than this without a newline is a broken or hostile stream.
const MAX_PENDING_CHARS = 1024 * 1024;
/**
 * An event whose `data:` lines total more than this before its blank line is one too: without a
 * bound, one endless event would grow the proxy's heap by all the upstream sends, for as long as
 * the stream may last (max_response_bytes does not apply to streams).
 */
export const MAX_EVENT_CHARS = 2 * 1024 * 1024;

export class SseParser {
  private buffer = '';
  private event: string | undefined;
  private data: string[] = [];
  /** Characters in `data`, newlines between lines counted. */
  private dataChars = 0;
  private id: string | undefined;
  private started = false;

  /** Feeds a chunk of text; returns the events it completes. */
  push(text: string): SseEvent[] {
    if (!this.started && text !== '') {
      this.started = true;
      // WHATWG: the stream is UTF-8 decoded, which drops one leading byte-order mark; left in, it
      // would make the first field name "\uFEFFdata" and lose the first event.
      if (text.startsWith('\uFEFF')) text = text.slice(1);
    }
    this.buffer += text;
    const out: SseEvent[] = [];
    let start = 0;
    for (;;) {
      const nl = this.buffer.slice(start).search(/\r\n|\r|\n/);
      if (nl === -1) break;
      const end = start + nl;
      // A lone CR at the end of a chunk may be the first half of CRLF: wait for more.
      if (this.buffer[end] === '\r' && end + 1 === this.buffer.length) break;
      const line = this.buffer.slice(start, end);
      start = end + (this.buffer.startsWith('\r\n', end) ? 2 : 1);
      const event = this.line(line);
      if (event) out.push(event);
    }
    this.buffer = this.buffer.slice(start);
    if (this.buffer.length > MAX_PENDING_CHARS) throw new Error('event stream line too long');
    return out;
  }

  /** The event pending when the stream ended without a final blank line (dispatched per spec: none). */
  end(): SseEvent[] {
    this.buffer = '';
    this.data = [];
    this.dataChars = 0;
    return [];
  }

  private line(line: string): SseEvent | undefined {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') {
      this.dataChars += value.length + 1;
      if (this.dataChars > MAX_EVENT_CHARS) throw new Error('event stream event too long');
      this.data.push(value);
    } else if (field === 'id' && !value.includes('\0')) this.id = value;
    return undefined;
  }

  private dispatch(): SseEvent | undefined {
    const event = this.event;
    const id = this.id;
    const data = this.data;
    this.event = undefined;
    this.data = [];
    this.dataChars = 0;
    if (data.length === 0) return undefined;
    return {
      ...(event !== undefined && event !== '' ? { event } : {}),
      data: data.join('\n'),
      ...(id ? { id } : {}),
    };
  }
}

/** One event in wire format; multi-line data becomes several `data:` lines. */
export function formatSse(event: 'data' | 'error' | 'done', data: string, id?: string): string {
  const lines = data.split(/\r\n|\r|\n/).map((l) => `data: ${l}`);
  return `event: ${event}\n${id !== undefined ? `id: ${id.replace(/[\r\n]/g, '')}\n` : ''}${lines.join('\n')}\n\n`;
}
