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

/**
 * Characters that steer a terminal (C0 controls but tab and line feed, DEL, C1 controls), reorder
 * what it shows (bidi controls) or break a line unseen. Text from a server or an OpenAPI document
 * may carry them: printed as they are, they could retitle or clear the terminal, or print a line
 * the server made up.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const TERMINAL_CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * Each such character as its JSON escape (`\u001b`): visible in text, and in JSON output (where
 * they can only stand inside strings) the same character, so the JSON still says what it said.
 */
export function visibleControls(text: string): string {
  return text.replace(
    TERMINAL_CONTROLS,
    (c) => `\\u${(c.codePointAt(0) ?? 0).toString(16).padStart(4, '0')}`,
  );
}

/** `io` with every character of TERMINAL_CONTROLS made visible: what the command line prints. */
export function terminalSafe(io: CliOutput): CliOutput {
  return {
    out: (text) => io.out(visibleControls(text)),
    err: (text) => io.err(visibleControls(text)),
    ...(io.drained ? { drained: () => (io.drained as () => Promise<void>)() } : {}),
  };
}

/** How an operator mistake (a UserError, exit code 2) is shown: one line, no stack. */
export function userErrorLine(message: string): string {
  return `agent-auth-proxy: ${message}\n`;
}
