/**
 * Issue 12, `--watch`: a change to the policy file reaches the same reload as SIGHUP after the
 * debounce (short here); the CLI wires watchFiles to RunningProxy.reload exactly so.
 */
import { writeFileSync } from 'node:fs';
import { afterEach, expect, it } from 'vitest';
import { watchFiles } from '../../../src/watch.js';
import { startProtocol, writePolicy, type TestProtocol } from '../../helpers/protocol.js';

let p: TestProtocol | undefined;
let unwatch: (() => void) | undefined;
afterEach(async () => {
  unwatch?.();
  await p?.close();
});

it('reloads once the watched policy file changes', async () => {
  const policy = writePolicy('capabilities:\n  defaults: [list_pets]\n');
  p = await startProtocol({ overrides: { policy } });
  const proxy = p.proxy;
  let reloads = 0;
  unwatch = watchFiles(
    [policy],
    () => {
      reloads++;
      void proxy.reload();
    },
    20,
  );
  const fx = await p.activeAgent(['list_pets']);
  expect((await p.execute(fx.agent, fx.agentId, 'list_pets')).status).not.toBe(403);

  writeFileSync(policy, 'capabilities:\n  defaults: [list_pets]\n  blocked: [list_pets]\n');
  const deadline = Date.now() + 5_000;
  while (!proxy.policy.blocked.has('list_pets') && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 10));
  }
  expect((await p.execute(fx.agent, fx.agentId, 'list_pets')).status).toBe(403);
  // One write, one reload: the events of a save are debounced into one.
  expect(reloads).toBe(1);
});
