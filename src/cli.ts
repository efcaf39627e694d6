#!/usr/bin/env node
/** The `agent-auth-proxy` executable: runs the command line (src/cli/main.ts) and sets the exit code. */
import { runCli } from './cli/main.js';

// A reader that stops early (`capabilities --json | head`) closes the pipe: the command's output is
// no longer wanted, which is no error worth a stack trace. Anything else on stdout still is.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err;
  process.exit(process.exitCode ?? 0);
});

runCli(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  // runCli reports every failure itself; this only guards against a failure to write it.
  () => {
    process.exitCode = 1;
  },
);
