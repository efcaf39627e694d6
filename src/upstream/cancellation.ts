/**
 * The cancellation of one upstream call: the agent went away, or the call's deadline passed.
 * undici takes an EventEmitter as a request's `signal` as well as an AbortSignal; this one costs
 * a fraction of an AbortController with its AbortSignal (an EventTarget), which showed in the
 * execute benchmark's profile, since every execution makes one whether or not it is ever used.
 */
import { EventEmitter } from 'node:events';

export class Cancellation extends EventEmitter {
  aborted = false;
  /** Why it was cancelled: what `abort` was given (undici fails the call with it). */
  reason: unknown = undefined;

  /** Cancels once; later calls change nothing, so the first reason stays. */
  abort(reason?: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit('abort');
  }
}
