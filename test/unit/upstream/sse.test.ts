import { describe, expect, it } from 'vitest';
import { formatSse, MAX_EVENT_CHARS, SseParser, type SseEvent } from '../../../src/upstream/sse.js';

// The upstream side follows WHATWG HTML "event stream interpretation"; the writer produces the
// §5.11 `data` / `error` / `done` events the proxy relays to agents.

function parse(...chunks: string[]): SseEvent[] {
  const parser = new SseParser();
  return chunks.flatMap((c) => parser.push(c));
}

/** The same stream fed one character at a time: chunk boundaries must not matter. */
function parseByteByByte(stream: string): SseEvent[] {
  return parse(...stream.split(''));
}

describe('SseParser', () => {
  it('dispatches an event at a blank line with LF line ends', () => {
    expect(parse('data: hello\n\n')).toEqual([{ data: 'hello' }]);
  });

  it('drops one leading byte-order mark, even in a chunk of its own, and keeps the first event', () => {
    expect(parse('\uFEFFdata: first\n\n')).toEqual([{ data: 'first' }]);
    expect(parse('', '\uFEFF', 'data: first\n\n')).toEqual([{ data: 'first' }]);
    expect(parseByteByByte('\uFEFFdata: first\n\n')).toEqual([{ data: 'first' }]);
  });

  it('keeps a byte-order mark that is not at the very start (it is then part of a field name)', () => {
    expect(parse('data: a\n\n', '\uFEFFdata: b\n\n')).toEqual([{ data: 'a' }]);
    expect(parse('\uFEFF\uFEFFdata: b\n\n')).toEqual([]);
  });

  it('accepts CR and CRLF line ends as well as LF', () => {
    expect(parse('data: a\r\rdata: b\r\n\r\ndata: c\n\n')).toEqual([
      { data: 'a' },
      { data: 'b' },
      { data: 'c' },
    ]);
  });

  it('treats a CRLF split across two chunks as one line end, not two', () => {
    // If the trailing CR were taken as a line end, the LF would end a blank line and dispatch
    // a half-built event: here "x" would be emitted alone and "y" would start a new event.
    const parser = new SseParser();
    expect(parser.push('data: x\r')).toEqual([]);
    expect(parser.push('\ndata: y\r')).toEqual([]);
    expect(parser.push('\n\r')).toEqual([]);
    expect(parser.push('\n')).toEqual([{ data: 'x\ny' }]);
  });

  it('ignores comment lines', () => {
    expect(parse(': keep-alive\n\n:another\ndata: real\n\n')).toEqual([{ data: 'real' }]);
  });

  it('reads the event, data and id fields', () => {
    expect(parse('event: update\nid: 42\ndata: {"n":1}\n\n')).toEqual([
      { event: 'update', data: '{"n":1}', id: '42' },
    ]);
  });

  it('removes exactly one leading space from a value, and only a space', () => {
    expect(parse('data:no-space\n\n', 'data:  two\n\n', 'data:\ttab\n\n')).toEqual([
      { data: 'no-space' },
      { data: ' two' },
      { data: '\ttab' },
    ]);
  });

  it('refuses an event whose data lines outgrow MAX_EVENT_CHARS before its blank line (one endless event)', () => {
    const parser = new SseParser();
    const line = `data: ${'x'.repeat(64 * 1024 - 1)}\n`;
    // Lines of 64 KiB (newlines counted) fill the bound exactly; the next goes past it.
    for (let i = 0; i < MAX_EVENT_CHARS / (64 * 1024); i++) expect(parser.push(line)).toEqual([]);
    expect(() => parser.push(line)).toThrow(/event too long/);
  });

  it('counts each event apart: as many events as wanted, each under the bound', () => {
    const parser = new SseParser();
    const event = `data: ${'x'.repeat(600 * 1024)}\n\n`;
    for (let i = 0; i < 8; i++) expect(parser.push(event)).toHaveLength(1);
  });

  it('joins several data lines with LF', () => {
    expect(parse('data: line 1\ndata:\ndata: line 3\n\n')).toEqual([{ data: 'line 1\n\nline 3' }]);
  });

  it('takes a field name without a colon as a field with an empty value', () => {
    expect(parse('data\ndata\n\n')).toEqual([{ data: '\n' }]);
  });

  it('does not dispatch an event without data lines', () => {
    expect(parse('\n\nevent: ping\n\nid: 7\n\n: comment\n\n')).toEqual([]);
  });

  it('resets the event type after each dispatch', () => {
    expect(parse('event: first\ndata: 1\n\ndata: 2\n\n')).toEqual([
      { event: 'first', data: '1' },
      { data: '2' },
    ]);
  });

  it('omits an empty event type (the default applies)', () => {
    expect(parse('event:\ndata: x\n\n')).toEqual([{ data: 'x' }]);
  });

  it('ignores unknown fields, including ones that merely start like known fields', () => {
    expect(parse('retry: 1000\nfoo: bar\ndatax: no\nevents: no\ndata: yes\n\n')).toEqual([{ data: 'yes' }]);
  });

  it('keeps the last event id across events (it is stream state, not event state)', () => {
    expect(parse('id: 1\ndata: a\n\ndata: b\n\n')).toEqual([
      { data: 'a', id: '1' },
      { data: 'b', id: '1' },
    ]);
  });

  it('ignores an id field that contains NUL', () => {
    expect(parse('id: 1\ndata: a\n\nid: 2\u00003\ndata: b\n\n')).toEqual([
      { data: 'a', id: '1' },
      { data: 'b', id: '1' },
    ]);
  });

  it('does not dispatch an unterminated final event', () => {
    const parser = new SseParser();
    expect(parser.push('data: complete\n\ndata: partial\n')).toEqual([{ data: 'complete' }]);
    expect(parser.end()).toEqual([]);
  });

  it('gives the same events whatever the chunk boundaries', () => {
    const stream =
      ': hello\r\nevent: a\r\nid: 9\r\ndata: one\r\ndata: two\r\n\r\n' +
      'data:three\r\rdata: four\n\nevent: b\ndata: {"x":"y"}\n\n';
    const expected: SseEvent[] = [
      { event: 'a', data: 'one\ntwo', id: '9' },
      { data: 'three', id: '9' },
      { data: 'four', id: '9' },
      { event: 'b', data: '{"x":"y"}', id: '9' },
    ];
    expect(parse(stream)).toEqual(expected);
    expect(parseByteByByte(stream)).toEqual(expected);
    for (let cut = 1; cut < stream.length; cut++) {
      expect(parse(stream.slice(0, cut), stream.slice(cut)), `cut at ${cut}`).toEqual(expected);
    }
  });

  it('throws on a line longer than 1 MiB without a line end', () => {
    const parser = new SseParser();
    expect(parser.push(`data: ${'x'.repeat(1024 * 1024 - 10)}`)).toEqual([]);
    expect(() => parser.push('x'.repeat(20))).toThrow(/too long/);
  });

  it('accepts long data when it arrives as complete lines', () => {
    const big = 'y'.repeat(512 * 1024);
    const parser = new SseParser();
    const events = [...parser.push(`data: ${big}\n`), ...parser.push(`data: ${big}\n\n`)];
    expect(events).toEqual([{ data: `${big}\n${big}` }]);
  });
});

describe('formatSse (§5.11 events)', () => {
  it('writes the event type, optional id and data, ended by a blank line', () => {
    expect(formatSse('data', '{"a":1}')).toBe('event: data\ndata: {"a":1}\n\n');
    expect(formatSse('done', '{}', '5')).toBe('event: done\nid: 5\ndata: {}\n\n');
  });

  it('splits multi-line data into one data line per line, whatever the line end', () => {
    expect(formatSse('data', 'a\nb\r\nc\rd')).toBe('event: data\ndata: a\ndata: b\ndata: c\ndata: d\n\n');
  });

  it('strips CR and LF from the id', () => {
    expect(formatSse('data', 'x', '1\r\n\nevent: error')).toBe('event: data\nid: 1event: error\ndata: x\n\n');
  });

  it('never lets a payload inject an extra event: parsing the output gives back exactly one event', () => {
    const hostile = 'ok\n\nevent: done\ndata: {"forged":true}\r\n\r\nid: 666\rdata: more';
    const hostileId = '7\n\nevent: error\ndata: forged\n\n';
    const wire = formatSse('data', hostile, hostileId);
    const events = parse(wire);
    expect(events).toHaveLength(1);
    expect(events[0]).toEqual({
      event: 'data',
      // Every line end of the payload comes back as LF; the content is intact.
      data: 'ok\n\nevent: done\ndata: {"forged":true}\n\nid: 666\ndata: more',
      id: '7event: errordata: forged',
    });
  });

  it('round-trips through the parser for each event type', () => {
    for (const type of ['data', 'error', 'done'] as const) {
      expect(parse(formatSse(type, 'line1\nline2', 'i'))).toEqual([
        { event: type, data: 'line1\nline2', id: 'i' },
      ]);
    }
  });
});
