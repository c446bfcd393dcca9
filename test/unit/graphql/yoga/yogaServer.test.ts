/**
 * The Yoga plugin attaches its HTTP steps to Yoga's server object; a Yoga older than the one whose per-operation
 * context it relies on is refused as the server starts, with a stable code.
 */
import { createSchema, createYoga } from 'graphql-yoga'
import { describe, expect, it } from 'vitest'
import { ErrorCodes } from '../../../../src/core/errors.js'
import { tokenBucket } from '../../../../src/core/limiters/tokenBucket.js'
import { useTollbooth } from '../../../../src/graphql/index.js'
import { checkYogaVersion } from '../../../../src/graphql/yoga/yogaServer.js'

describe('checkYogaVersion', () => {
  it.each(['5.10.2', '5.10.10', '5.11.0', '5.24.1', '6.0.0', '5.22.1-alpha-20260908182732'])(
    'accepts %s',
    (version) => {
      expect(() => checkYogaVersion(version)).not.toThrow()
    },
  )

  it.each(['5.10.1', '5.9.9', '5.0.0', '4.0.5', 'not a version'])(
    'refuses %s, naming the version needed',
    (version) => {
      expect(() => checkYogaVersion(version)).toThrow(
        expect.objectContaining({
          code: ErrorCodes.UNSUPPORTED_PEER,
          message: `useTollbooth: graphql-yoga 5.10.2 or newer is needed, got ${version}`,
        }),
      )
    },
  )
})

describe('createYoga with useTollbooth', () => {
  it('starts on the Yoga in this tree, and answers with the RateLimit fields written', async () => {
    const limiter = tokenBucket({ name: 'yoga-server-unit', capacity: 10, refillPerSecond: 0.001 })
    const yoga = createYoga({
      schema: createSchema({
        typeDefs: 'type Query { hello: String }',
        resolvers: { Query: { hello: () => 'hi' } },
      }),
      logging: false,
      plugins: [useTollbooth({ limiter, identify: () => 'alice' })],
    })
    const response = await yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ hello }' }),
    })
    expect(await response.json()).toMatchObject({
      data: { hello: 'hi' },
      extensions: { cost: { actualQueryCost: 1 } },
    })
    expect(response.headers.get('ratelimit')).toMatch(/;r=9;/)
    expect((await limiter.peek('alice')).remaining).toBe(9)
  })
})
