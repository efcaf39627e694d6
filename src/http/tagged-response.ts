/**
 * A response that writes one header of its own (the request id) into whichever head it sends.
 *
 * Why not `setHeader` up front: once any header is set that way, Node's `writeHead(status,
 * headers)` takes its slow path and passes every header of the head through `setHeader` again
 * (validation, lower-casing, an entry array each). On the execute benchmark that path was about
 * 2 µs of the proxy's CPU per request, where a head written in one `writeHead` costs what the
 * floor's does. Merging the header into the head keeps Node's fast path, and the header still
 * reaches every answer: a head written without an object (an implicit one, `res.end()` alone, or
 * a flat array) gets it through `setHeader`, as before.
 */
import {
  ServerResponse,
  type IncomingMessage,
  type OutgoingHttpHeader,
  type OutgoingHttpHeaders,
} from 'node:http';

type Head = OutgoingHttpHeaders | OutgoingHttpHeader[];

export class TaggedResponse<
  Request extends IncomingMessage = IncomingMessage,
> extends ServerResponse<Request> {
  /** Lower-case name and value, added to the next head written; cleared once it is. */
  #tag: readonly [string, string] | undefined;

  /** The header every answer to this request carries, unless the route writes its own value. */
  tag(name: string, value: string): void {
    this.#tag = [name, value];
  }

  override writeHead(statusCode: number, headers?: Head): this;
  override writeHead(statusCode: number, statusMessage?: string, headers?: Head): this;
  override writeHead(statusCode: number, second?: string | Head, third?: Head): this {
    const tag = this.#tag;
    this.#tag = undefined;
    const message = typeof second === 'string' ? second : undefined;
    const headers = typeof second === 'string' ? third : second;
    // The route's own value wins (set before, or in the head), as it did over a header set first.
    if (tag === undefined || this.hasHeader(tag[0])) return this.#write(statusCode, message, headers);
    const [name, value] = tag;
    if (headers !== undefined && !Array.isArray(headers)) {
      // As a flat list, which Node also writes on its fast path: the caller's object may be shared,
      // and copying an object (spread) cost more than the slow path saved.
      const head: OutgoingHttpHeader[] = [];
      for (const key in headers) {
        const v = headers[key];
        if (v !== undefined) head.push(key, v);
      }
      if (headers[name] === undefined) head.push(name, value);
      return this.#write(statusCode, message, head);
    }
    this.setHeader(name, value);
    return this.#write(statusCode, message, headers);
  }

  #write(statusCode: number, message: string | undefined, headers: Head | undefined): this {
    return message === undefined
      ? super.writeHead(statusCode, headers)
      : super.writeHead(statusCode, message, headers);
  }
}
