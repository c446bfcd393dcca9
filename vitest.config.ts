import { createRequire } from 'node:module'
import { defineConfig } from 'vitest/config'

const require = createRequire(import.meta.url)

export default defineConfig({
  resolve: {
    // graphql has no `exports` map: Node resolves `graphql` to its CommonJS build (index.js) for every package
    // loaded natively (graphql-ws, graphql-yoga, @envelop/*), while vite would pick `index.mjs` for files it
    // transforms (tests, src). Two copies mean "Cannot use GraphQLSchema from another module or realm", so
    // tests and src get the very file Node loads, and there is one graphql.
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }],
  },
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
