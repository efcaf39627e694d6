#!/usr/bin/env node
/** The `agent-auth-proxy` executable: runs the command line (src/cli/main.ts) and sets the exit code. */
import { runCli } from './cli/main.js';

runCli(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  // runCli reports every failure itself; this only guards against a failure to write it.
  () => {
    process.exitCode = 1;
  },
);
