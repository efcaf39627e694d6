/**
 * The primary's orders to its workers (`--workers`), over the cluster's IPC channel rather than
 * by signals: a worker ignores signals from outside (src/cluster/worker.ts), so a signal sent to
 * the whole process group is acted on once, by the primary, which orders each worker in turn.
 *
 * A message sent before the worker listens for it is lost (Node drops a `message` nobody listens
 * to), and a worker loads its modules first: the primary keeps each worker's orders until the
 * worker says it takes them (TAKING_ORDERS), then sends them in the order given.
 */
import type { Worker } from 'node:cluster';

/** reload: read the config again (kept until it serves); drain: stop gracefully; end-now: exit at once. */
export type Order = 'reload' | 'drain' | 'end-now';

const ORDER = 'agent-auth-proxy:order';
/** A worker's first message: it listens for orders from now on. */
const TAKING_ORDERS = 'agent-auth-proxy:taking-orders';

export interface OrderMessage {
  readonly type: typeof ORDER;
  readonly order: Order;
}

function hasType(message: unknown, type: string): message is { type: string } {
  return typeof message === 'object' && message !== null && (message as { type?: unknown }).type === type;
}

export function isOrderMessage(message: unknown): message is OrderMessage {
  if (!hasType(message, ORDER)) return false;
  const order = (message as { order?: unknown }).order;
  return order === 'reload' || order === 'drain' || order === 'end-now';
}

export function isTakingOrders(message: unknown): boolean {
  return hasType(message, TAKING_ORDERS);
}

/** In a worker: tells the primary it may send orders now. */
export function sayTakingOrders(): void {
  // A callback, so that a channel already closed (the primary gone) is no uncaught 'error'.
  process.send?.({ type: TAKING_ORDERS }, undefined, undefined, () => undefined);
}

/** In the primary: each worker's orders, sent once it takes them. */
export class OrderBook {
  readonly #taking = new WeakSet<Worker>();
  readonly #kept = new Map<Worker, Set<Order>>();

  give(worker: Worker, order: Order): void {
    if (this.#taking.has(worker)) send(worker, order);
    else {
      // A set: a second reload asked before the worker listens is the same reload.
      const kept = this.#kept.get(worker) ?? new Set<Order>();
      kept.add(order);
      this.#kept.set(worker, kept);
    }
  }

  /** The worker said TAKING_ORDERS: what was kept for it goes now. */
  taking(worker: Worker): void {
    this.#taking.add(worker);
    for (const order of this.#kept.get(worker) ?? []) send(worker, order);
    this.#kept.delete(worker);
  }

  /** The worker exited. */
  forget(worker: Worker): void {
    this.#kept.delete(worker);
  }
}

function send(worker: Worker, order: Order): void {
  if (!worker.isConnected()) return;
  // A worker that exits meanwhile: its exit is handled on its own; the error has nobody to tell.
  worker.send({ type: ORDER, order } satisfies OrderMessage, undefined, () => undefined);
}
