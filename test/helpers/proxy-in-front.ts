/** Starts the test proxy in front of a running TestUpstream with one close() for both, and closes the upstream if the proxy fails to start (gateway.ts, per-call.ts). */
import { startProtocol, type TestProtocol } from './protocol.js';
import type { TestUpstream } from './upstream.js';

export interface InFront {
  readonly p: TestProtocol;
  /** Closes the proxy, then the upstream. */
  readonly close: () => Promise<void>;
}

export async function startInFrontOf(
  upstream: TestUpstream,
  options: Parameters<typeof startProtocol>[0],
): Promise<InFront> {
  try {
    const p = await startProtocol(options);
    return {
      p,
      close: async () => {
        await p.close();
        await upstream.close();
      },
    };
  } catch (err) {
    await upstream.close();
    throw err;
  }
}
