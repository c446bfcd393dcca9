/**
 * `tollboothApolloPlugin(…).graphqlWs(options)` on its own: the graphql-ws options are checked like every other
 * options object, and a context without the Node request is noticed. A real Apollo Server (for its logger), a real
 * `ws` server with graphql-ws' `useServer`, and a real graphql-ws client on 127.0.0.1.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { ApolloServer } from '@apollo/server'
import { buildSchema } from 'graphql'
import { createClient, type ServerOptions } from 'graphql-ws'
import { useServer } from 'graphql-ws/use/ws'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocket, WebSocketServer } from 'ws'
import { tollboothApolloPlugin } from '../../../src/graphql/apollo/index.js'
import { tokenBucket } from '../../../src/index.js'

const schema = buildSchema('type Query { hello: String }')
const rootValue = { hello: () => 'world' }
const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

function plugin() {
  return tollboothApolloPlugin({ limiter: tokenBucket({ name: 'ws', capacity: 100, refillPerSecond: 1 }) })
}

/**
 * An Apollo Server with `tollbooth` (started, for its logger) and graphql-ws on a `ws` server with
 * `tollbooth.graphqlWs(options)`, on 127.0.0.1; answers a graphql-ws client of it. All stopped after the test.
 */
async function serveOverWs(
  tollbooth: ReturnType<typeof tollboothApolloPlugin>,
  apolloOptions: ConstructorParameters<typeof ApolloServer>[0],
  graphqlWsOptions: ServerOptions,
) {
  const apollo = new ApolloServer(apolloOptions)
  await apollo.start()
  cleanups.push(() => apollo.stop())
  const httpServer = createServer()
  const wss = new WebSocketServer({ server: httpServer })
  const graphqlWs = useServer(tollbooth.graphqlWs(graphqlWsOptions), wss)
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve))
  cleanups.push(async () => {
    await graphqlWs.dispose()
    await new Promise((resolve) => httpServer.close(resolve))
  })
  const client = createClient({
    url: `ws://127.0.0.1:${(httpServer.address() as AddressInfo).port}`,
    webSocketImpl: WebSocket,
    retryAttempts: 0,
  })
  cleanups.push(() => client.dispose() as Promise<void>)
  return client
}

describe('tollboothApolloPlugin(…).graphqlWs', () => {
  it('refuses a misspelt graphql-ws option, naming it and the closest one', () => {
    const context = () => ({})
    expect(() => plugin().graphqlWs({ schema, contxt: context } as never)).toThrow(
      expect.objectContaining({
        code: 'TOLLBOOTH_ERR_INVALID_OPTION',
        message: expect.stringMatching(
          /^tollboothApolloPlugin\.graphqlWs: unknown option "contxt" \(did you mean "context"\?\)/,
        ),
      }),
    )
    expect(() => plugin().graphqlWs({ schema, context })).not.toThrow()
  })

  it('warns once, through Apollo’s logger, when a WebSocket operation’s context has no request', async () => {
    const warnings: string[] = []
    const logger = {
      debug: () => {},
      info: () => {},
      warn: (message: string) => void warnings.push(message),
      error: () => {},
    }
    const tollbooth = plugin()
    const client = await serveOverWs(
      tollbooth,
      { schema, plugins: [tollbooth], logger },
      { schema, roots: { query: rootValue } },
    )
    for (let i = 0; i < 2; i++) {
      const result = await client.iterate({ query: '{ hello }' }).next()
      expect(result.value).toMatchObject({ data: { hello: 'world' } })
    }
    expect(warnings).toEqual([expect.stringContaining('the GraphQL context has no `req`')])
    expect(warnings[0]).toContain('context: (ctx) => ({ req: ctx.extra.request })')
  })

  it('a field limit refusing a run under a list goes out as a field error without `extensions.http`', async () => {
    const limited = buildSchema(`
      type Query { accounts: [Account!]! }
      type Account { id: ID! check: Boolean }
    `)
    const root = { accounts: () => [1, 2, 3].map((id) => ({ id, check: () => true })) }
    const tollbooth = tollboothApolloPlugin({
      limiter: tokenBucket({ name: 'ws-field', capacity: 100, refillPerSecond: 1 }),
      fieldLimits: { 'Account.check': { limit: 2, windowMs: 60_000 } },
    })
    const client = await serveOverWs(
      tollbooth,
      { schema: limited, plugins: [tollbooth] },
      {
        schema: limited,
        roots: { query: root },
        context: (ctx: { extra: { request: unknown } }) => ({ req: ctx.extra.request }),
      },
    )
    // One occurrence paid at admission, three runs: the second is paid as it runs, the third is past the limit.
    const result = (await client.iterate({ query: '{ accounts { id check } }' }).next()).value
    expect(result?.data).toEqual({
      accounts: [
        { id: '1', check: true },
        { id: '2', check: true },
        { id: '3', check: null },
      ],
    })
    expect(result?.errors).toHaveLength(1)
    expect(result?.errors?.[0]).toMatchObject({
      path: ['accounts', 2, 'check'],
      extensions: { code: 'RATE_LIMITED' },
    })
    expect(result?.errors?.[0]?.extensions).not.toHaveProperty('http')
  })
})
