/**
 * A TCP relay in front of a server (the PostgreSQL of test/helpers/postgres.ts) that can go
 * silent: `freeze` stops passing bytes on every connection and leaves new ones accepted but
 * unanswered, as a database behind a partition or a dead host looks to its clients (nothing is
 * refused, nothing arrives). `thaw` resets the frozen connections and relays again. Unlike a
 * stopped server, this is where the clients' connection and statement timeouts are all that end
 * a wait.
 *
 * `loseAnswerTo(marker)` loses one answer: the next client bytes holding `marker` (a COMMIT) are
 * passed on, nothing more comes back, and both sides are closed 300 ms later. The server has done
 * what it was asked; the client cannot know whether it did (a commit whose answer was lost).
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export interface TcpRelay {
  readonly port: number;
  /** From now on no byte passes, and new connections are accepted but never answered. */
  freeze(): void;
  /** Resets every frozen connection and relays again. */
  thaw(): void;
  /** Once: passes on the client bytes holding `marker`, then drops the answer and the connection. */
  loseAnswerTo(marker: Buffer): void;
  close(): Promise<void>;
}

export async function startTcpRelay(target: { host: string; port: number }): Promise<TcpRelay> {
  let frozen = false;
  let losing: Buffer | undefined;
  const sockets = new Set<Socket>();
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.once('close', () => sockets.delete(socket));
  };
  const server: Server = createServer((client) => {
    track(client);
    if (frozen) {
      client.pause();
      return;
    }
    const upstream = connect(target.port, target.host);
    track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('data', (chunk: Buffer) => {
      if (losing === undefined || !chunk.includes(losing)) return;
      losing = undefined;
      // The chunk goes on through the pipe; its answer does not come back.
      upstream.unpipe(client);
      setTimeout(() => {
        upstream.destroy();
        client.destroy();
      }, 300);
    });
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (!address || typeof address !== 'object') throw new Error('the relay has no port');
  return {
    port: address.port,
    freeze: () => {
      frozen = true;
      for (const socket of sockets) {
        socket.unpipe();
        socket.pause();
      }
    },
    thaw: () => {
      frozen = false;
      for (const socket of sockets) socket.destroy();
    },
    loseAnswerTo: (marker) => {
      losing = marker;
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
