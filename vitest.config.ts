import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // Integration tests each boot their own servers on port 0, so files run in parallel safely.
    pool: 'forks',
    // A worker keeps its module cache from file to file, so the app and its dependencies are not
    // imported again for each of 100 files (on 2 cores the suite took 371 s isolated, 269 s not).
    // So no test may depend on module state or module mocks: inject what a test needs to see
    // (e.g. generateUserCode's draw), as the servers, clocks and stores already are.
    isolate: false,
    // A worker per core, and two on a 2-core machine: Vitest's default (cores - 1) ran one file at a
    // time there, while most files wait on servers, browsers and databases rather than compute
    // (2 cores, 200 files: 288 s with one worker, 210 s with two, 220 s with three).
    maxWorkers: Math.max(2, availableParallelism()),
    testTimeout: 20_000,
    hookTimeout: 30_000,
  },
});
