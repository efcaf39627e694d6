import { once } from 'node:events';

/** Where a command writes: the process's streams, or (in tests) strings. */
export interface CliOutput {
  out(text: string): void;
  err(text: string): void;
  /**
   * Resolves once what `out` was given has been taken by the reader, for commands that write a lot
   * piece by piece (backpressure). Outputs that keep nothing buffered need not have it.
   */
  drained?(): Promise<void>;
}

export const processOutput: CliOutput = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
  drained: async () => {
    // Rejects if stdout fails (a closed pipe) instead of waiting forever.
    if (process.stdout.writableNeedDrain) await once(process.stdout, 'drain');
  },
};

/** How an operator mistake (a UserError, exit code 2) is shown: one line, no stack. */
export function userErrorLine(message: string): string {
  return `agent-auth-proxy: ${message}\n`;
}
