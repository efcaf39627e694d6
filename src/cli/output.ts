/** Where a command writes: the process's streams, or (in tests) strings. */
export interface CliOutput {
  out(text: string): void;
  err(text: string): void;
}

export const processOutput: CliOutput = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
};

/** How an operator mistake (a UserError, exit code 2) is shown: one line, no stack. */
export function userErrorLine(message: string): string {
  return `agent-auth-proxy: ${message}\n`;
}
