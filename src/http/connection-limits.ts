/**
 * What one client, and all of them together, may hold open (README "Bounds"), and a deadline for
 * a connection's first request headers: Node's own headersTimeout only starts once a request has
 * begun, so a socket that never sends a byte would otherwise stay.
 *
 * A connection past a cap is not reset on arrival: its first request is answered with the error it
 * earned, with Retry-After and `Connection: close`, so the client learns why (§8.13: 429
 * `rate_limited` past the per-address cap; 503 `temporarily_unavailable` past the total). Refused
 * connections are bounded in turn: each has REFUSED_DEADLINE_MS to send its request, one peer holds
 * at most REFUSED_PER_PEER of them at a time, and all connections together, served or refused,
 * stay within max_connections + REFUSED_AT_ONCE (Node's own `maxConnections`, which closes a
 * connection before any object is made for it). Past those bounds a connection is closed on
 * arrival.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { ConnectionSettings } from '../config/settings.js';
import { ProtocolError } from '../errors.js';
import type { ConnectionCap, RefusalOutcome } from '../metrics.js';
import { clientNetwork } from '../util/client-network.js';
import { unmapIpv4 } from '../util/internal-addresses.js';
import type { ClientAddress } from './client-address.js';

const REFUSED_AT_ONCE = 64;
export const REFUSED_PER_PEER = 4;
const REFUSED_DEADLINE_MS = 1_000;

/** Open connections per client network. */
class Tally {
  readonly #counts = new Map<string, number>();

  count(peer: string): number {
    return this.#counts.get(peer) ?? 0;
  }

  /** One more for `peer`, until `socket` closes. */
  hold(peer: string, socket: Socket): void {
    this.#counts.set(peer, this.count(peer) + 1);
    socket.once('close', () => {
      const left = this.count(peer) - 1;
      if (left <= 0) this.#counts.delete(peer);
      else this.#counts.set(peer, left);
    });
  }
}

export class ConnectionGate {
  readonly #settings: ConnectionSettings;
  readonly #clientAddress: ClientAddress;
  readonly #served = new Tally();
  readonly #refused = new Tally();
  #servedTotal = 0;
  readonly #refusals = new WeakMap<Socket, ProtocolError>();
  readonly #silent = new WeakMap<Socket, NodeJS.Timeout>();
  readonly #overTotal: ProtocolError;
  readonly #overPeer: ProtocolError;
  readonly #onRefused: ((cap: ConnectionCap, outcome: RefusalOutcome) => void) | undefined;

  constructor(
    settings: ConnectionSettings,
    clientAddress: ClientAddress,
    /** Each connection refused (the metrics' connections_refused_total). */
    onRefused?: (cap: ConnectionCap, outcome: RefusalOutcome) => void,
  ) {
    this.#settings = settings;
    this.#clientAddress = clientAddress;
    this.#onRefused = onRefused;
    this.#overTotal = tooManyInTotal(settings.maxConnections);
    this.#overPeer = tooManyFromPeer(settings.maxConnectionsPerIp);
  }

  /** The error every request on `socket` gets, when the connection came past a cap. */
  refusalOf(socket: Socket): ProtocolError | undefined {
    return this.#refusals.get(socket);
  }

  guard(server: Server): void {
    server.maxConnections = this.#settings.maxConnections + REFUSED_AT_ONCE;
    server.on('connection', (socket: Socket) => this.#admit(socket));
    // The first request's headers arrived: from here on Node's own timeouts apply.
    server.on('request', (req: { socket: Socket }) => clearTimeout(this.#silent.get(req.socket)));
  }

  #admit(socket: Socket): void {
    const address = socket.remoteAddress ?? 'unknown';
    // Counted per client network: an IPv6 peer's /64 (clientNetwork), an IPv4 peer's address.
    const peer = clientNetwork(address);
    if (this.#servedTotal >= this.#settings.maxConnections) {
      this.#refuse(socket, peer, 'max_connections', this.#overTotal);
      return;
    }
    const trusted = this.#clientAddress.isTrusted(unmapIpv4(address));
    if (!trusted && this.#served.count(peer) >= this.#settings.maxConnectionsPerIp) {
      this.#refuse(socket, peer, 'max_connections_per_ip', this.#overPeer);
      return;
    }
    this.#servedTotal++;
    if (!trusted) this.#served.hold(peer, socket);
    this.#silent.set(socket, setTimeout(() => socket.destroy(), this.#settings.headersTimeoutMs).unref());
    socket.once('close', () => {
      this.#servedTotal--;
      clearTimeout(this.#silent.get(socket));
    });
  }

  #refuse(socket: Socket, peer: string, cap: ConnectionCap, error: ProtocolError): void {
    if (this.#refused.count(peer) >= REFUSED_PER_PEER) {
      socket.destroy();
      this.#onRefused?.(cap, 'closed');
      return;
    }
    this.#onRefused?.(cap, 'answered');
    this.#refused.hold(peer, socket);
    this.#refusals.set(socket, error);
    const deadline = setTimeout(() => socket.destroy(), REFUSED_DEADLINE_MS).unref();
    socket.once('close', () => clearTimeout(deadline));
  }
}

const REFUSAL_HEADERS = { connection: 'close', 'retry-after': '1' };

function tooManyFromPeer(cap: number): ProtocolError {
  return new ProtocolError(
    'rate_limited',
    `This address already holds ${cap} open connections (server.max_connections_per_ip); reuse one of them or retry later.`,
    { headers: REFUSAL_HEADERS },
  );
}

function tooManyInTotal(cap: number): ProtocolError {
  return new ProtocolError(
    'temporarily_unavailable',
    `The proxy already holds its ${cap} open connections (server.max_connections); retry later.`,
    { headers: REFUSAL_HEADERS },
  );
}
