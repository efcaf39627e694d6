/**
 * The §5.11 event-stream answer of an execution: the upstream's events relayed as `data`,
 * `error` and `done`, with secrets scrubbed, revocation re-checked while it runs, a maximum
 * duration, and a `done` whatever ends it.
 */
import type { ServerResponse } from 'node:http';
import type { ExecutionSettings } from '../config/settings.js';
import { ProtocolError, toProtocolError } from '../errors.js';
import type { ProtocolContext } from '../protocol/context.js';
import { streamStillAuthorized, type AuthorizedExecution } from '../protocol/execute.js';
import type { Cancellation } from '../upstream/cancellation.js';
import type { UpstreamReply } from '../upstream/client.js';
import { errorCode } from '../upstream/oauth.js';
import { formatSse, SseParser } from '../upstream/sse.js';

// How long an ended stream's last events wait for an agent that has stopped reading.
const UNREAD_END_GRACE_MS = 10_000;

export interface RelayOptions {
  readonly ctx: ProtocolContext;
  readonly settings: ExecutionSettings;
}

/**
 * Relays the upstream's event stream as §5.11 events: `error` and `done` pass through, anything
 * else becomes `data`; a `done` always ends the stream, whatever ends it (upstream end, upstream
 * failure, revocation, the maximum duration).
 */
export async function relayStream(
  res: ServerResponse,
  { reply, scrub }: { reply: UpstreamReply; scrub: (text: string) => string },
  authorized: AuthorizedExecution,
  options: RelayOptions,
  abort: Cancellation,
  open: Set<(error?: ProtocolError) => void>,
): Promise<void> {
  const { ctx, settings } = options;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
  res.flushHeaders();
  reply.done();
  let finished = false;
  const finish = (error?: ProtocolError, final = ''): void => {
    if (finished) return;
    finished = true;
    open.delete(finish);
    clearInterval(check);
    clearTimeout(deadline);
    if (error) res.write(formatSse('error', JSON.stringify(error.toBody())));
    res.end(formatSse('done', scrub(final)));
    reply.body.destroy();
    // An agent that stopped reading would keep the connection, and what is queued for it, for
    // as long as it likes: it gets a while to read the end, then the connection is closed.
    if (!res.writableFinished) setTimeout(() => res.destroy(), UNREAD_END_GRACE_MS).unref();
  };
  const agentId = authorized.auth.agent.id;
  const check = setInterval(() => {
    // Streaming is use of the agent: it keeps the session alive (§2.4), and is re-checked.
    ctx.usage.recordAgent(agentId, authorized.auth.host.id, ctx.clock.now());
    streamStillAuthorized(ctx, agentId, authorized.capability.name).then(
      (problem) => {
        if (problem) finish(problem);
      },
      (err: unknown) => {
        finish(toProtocolError(err));
      },
    );
  }, settings.streamRevocationCheckMs).unref();
  const deadline = setTimeout(
    () => finish(new ProtocolError('stream_timeout')),
    settings.streamMaxDurationMs,
  ).unref();
  // The agent went away: stop relaying and cancel the upstream request (its body is destroyed).
  res.once('close', () => finish());
  open.add(finish);
  const parser = new SseParser();
  // undici's body yields Buffers whatever setEncoding says; a streaming decoder keeps a character
  // split across two chunks whole (decoding each chunk alone would corrupt it).
  const decoder = new TextDecoder('utf-8');
  try {
    for await (const chunk of reply.body) {
      if (finished) break;
      for (const event of parser.push(decoder.decode(chunk as Buffer, { stream: true }))) {
        if (event.event === 'done') {
          finish(undefined, event.data);
          break;
        }
        // Ids are echoed too, so they are scrubbed like the data.
        const id = event.id === undefined ? undefined : scrub(event.id);
        if (event.event === 'error') {
          res.write(formatSse('error', asErrorObject(scrub(event.data)), id));
        } else {
          res.write(formatSse('data', scrub(event.data), id));
        }
      }
      // Backpressure: the next chunk is read from the upstream only once the agent has taken
      // this one. Without it an agent that stops reading had the proxy queue the whole stream in
      // memory (800 MB in 8 s of 64 KiB events); now it queues about one chunk, and the upstream
      // is held back through its own connection.
      if (res.writableNeedDrain && !finished) await drained(res);
    }
    finish();
  } catch (err) {
    if (abort.aborted) finish();
    else finish(streamFailure(err));
  }
}

/**
 * Why a relayed stream broke off, for the agent. The client sets no idle cut on a stream's body
 * (client.ts), but a timeout that still ends one is the upstream's slowness, not its absence.
 */
export function streamFailure(err: unknown): ProtocolError {
  const code = errorCode(err);
  if (code === 'UND_ERR_BODY_TIMEOUT' || code === 'TimeoutError') {
    return new ProtocolError('upstream_timeout', 'The upstream stream sent nothing for too long.', {
      cause: err,
    });
  }
  return new ProtocolError('upstream_unavailable', 'The upstream stream failed.', { cause: err });
}

/** Resolves once `res` takes more writes again, or has closed. */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

/** §5.13: an upstream `error` event's data as an error object. */
function asErrorObject(data: string): string {
  try {
    const value: unknown = JSON.parse(data);
    if (value && typeof value === 'object' && !Array.isArray(value) && 'error' in value) return data;
  } catch {
    // not JSON: wrapped below
  }
  return JSON.stringify({ error: 'upstream_error', message: data });
}
