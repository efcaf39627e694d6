import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Integration tests each boot their own servers on port 0, so files run in parallel safely.
    pool: 'forks',
    testTimeout: 20_000,
    hookTimeout: 30_000,
  },
});
