/**
 * Issue 12, `--watch`: a change to the policy file reaches the same reload as SIGHUP after the
 * debounce (short here); the CLI wires watchFiles to RunningProxy.reload exactly so.
 */
import { mkdirSync, mkdtempSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

it("reloads when a Kubernetes ConfigMap volume swaps its ..data link (the file's own name never changes)", async () => {
  // The kubelet's layout: policy.yaml -> ..data/policy.yaml, ..data -> ..<timestamp>.
  const dir = mkdtempSync(join(tmpdir(), 'aap-configmap-'));
  const version = (name: string, text: string): void => {
    mkdirSync(join(dir, name));
    writeFileSync(join(dir, name, 'policy.yaml'), text);
  };
  version('..2026_11_28_01', 'capabilities:\n  defaults: [list_pets]\n');
  symlinkSync('..2026_11_28_01', join(dir, '..data'));
  symlinkSync('..data/policy.yaml', join(dir, 'policy.yaml'));
  p = await startProtocol({ overrides: { policy: join(dir, 'policy.yaml') } });
  const proxy = p.proxy;
  unwatch = watchFiles([join(dir, 'policy.yaml')], () => void proxy.reload(), 20);

  version('..2026_11_28_02', 'capabilities:\n  defaults: [list_pets]\n  blocked: [list_pets]\n');
  symlinkSync('..2026_11_28_02', join(dir, '..data_tmp'));
  renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
  const deadline = Date.now() + 5_000;
  while (!proxy.policy.blocked.has('list_pets') && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 10));
  }
  expect(proxy.policy.blocked.has('list_pets')).toBe(true);
});
