/**
 * Requests Node's HTTP parser refuses before any handler sees them: bad framing (Content-Length
 * with Transfer-Encoding, two Content-Lengths), obs-fold, control bytes, a head over
 * `server.max_header_bytes`, a head not sent in time. Node's own answer has no body and no
 * request id; this one is a §5.13 error like every other, then the connection closes.
 */
import { randomUUID } from 'node:crypto';
import type { Duplex } from 'node:stream';

const ANSWERS: Readonly<Record<string, readonly [number, string, string]>> = {
  HPE_HEADER_OVERFLOW: [
    431,
    'Request Header Fields Too Large',
    'The request head exceeds server.max_header_bytes.',
  ],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout', 'The request was not received in time.'],
};
const MALFORMED = [400, 'Bad Request', 'The request is not valid HTTP/1.1.'] as const;

export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex, requestIdHeader: string): void {
  // As Node's own handler: only on a connection that has not been answered on (a response of an
  // earlier request may be half written), and never on one the client has already reset.
  const sent = (socket as Duplex & { bytesWritten?: number }).bytesWritten ?? 0;
  if (err.code === 'ECONNRESET' || !socket.writable || sent > 0) {
    socket.destroy();
    return;
  }
  const [status, reason, message] = ANSWERS[err.code ?? ''] ?? MALFORMED;
  const body = JSON.stringify({ error: 'invalid_request', message });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
      `${requestIdHeader}: ${randomUUID()}\r\nconnection: close\r\n\r\n${body}`,
  );
}
