/**
 * A real upstream HTTP server on 127.0.0.1 that records every request it receives (method, raw
 * path, headers, body bytes) and answers from per-route handlers the test installs, or by
 * echoing the request as JSON. Tests assert on `requests` to prove what did, and did not,
 * reach the API.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  readonly method: string;
  /** The request target exactly as received (path and query, still encoded). */
  readonly url: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly headers: IncomingMessage['headers'];
  readonly body: Buffer;
}

export type UpstreamHandler = (req: RecordedRequest, res: ServerResponse) => void | Promise<void>;

export class TestUpstream {
  readonly requests: RecordedRequest[] = [];
  private readonly handlers = new Map<string, UpstreamHandler>();
  private readonly sockets = new Set<import('node:net').Socket>();

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {
    server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  static async start(): Promise<TestUpstream> {
    // The request listener is attached once the instance exists (it needs the URL first).
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const upstream = new TestUpstream(server, `http://127.0.0.1:${port}`);
    server.on('request', (req, res) => void upstream.handle(req, res));
    return upstream;
  }

  /** Installs a handler for `METHOD /path` (path without query; `*` matches any method). */
  on(route: string, handler: UpstreamHandler): void {
    this.handlers.set(route, handler);
  }

  reset(): void {
    this.requests.length = 0;
    this.handlers.clear();
  }

  /** Requests whose path starts with `prefix`. */
  received(prefix = '/'): RecordedRequest[] {
    return this.requests.filter((r) => r.path.startsWith(prefix));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const recorded: RecordedRequest = {
      method: req.method ?? 'GET',
      url,
      path: q === -1 ? url : url.slice(0, q),
      query: new URLSearchParams(q === -1 ? '' : url.slice(q + 1)),
      headers: req.headers,
      body: Buffer.concat(chunks),
    };
    this.requests.push(recorded);
    const handler =
      this.handlers.get(`${recorded.method} ${recorded.path}`) ?? this.handlers.get(`* ${recorded.path}`);
    try {
      if (handler) {
        await handler(recorded, res);
        return;
      }
      json(res, 200, {
        method: recorded.method,
        url,
        headers: req.headers,
        body: recorded.body.toString('utf8'),
      });
    } catch (err) {
      if (!res.headersSent) json(res, 500, { error: String(err) });
      else res.destroy();
    }
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

export function json(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(payload),
    ...headers,
  });
  res.end(payload);
}
