import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/globalSetup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // vitest's summary, then one plain "N passed, N failed" line (see countsReporter.ts).
    reporters: ['default', './test/helpers/countsReporter.ts'],
  },
})
