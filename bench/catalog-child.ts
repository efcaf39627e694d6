/**
 * Child process of the catalog benchmark: starts the real proxy on one document and reports the
 * time to readiness and the process's peak RSS. Run in a fresh process so memory is its own.
 */
import { startProxy } from '../src/app.js';
import { resolveSettings } from '../src/config/settings.js';
import { silentLogger } from '../src/log.js';

const file = process.argv[2] as string;
const started = performance.now();
const proxy = await startProxy(resolveSettings({ specs: [file], port: 0 }), { logger: silentLogger });
const ms = performance.now() - started;
const ready = await fetch(`${proxy.url}/readyz`).then((r) => r.json() as Promise<{ capabilities: number }>);
await proxy.close();
process.stdout.write(
  JSON.stringify({ ms, capabilities: ready.capabilities, maxRssMiB: process.resourceUsage().maxRSS / 1024 }) +
    '\n',
);
