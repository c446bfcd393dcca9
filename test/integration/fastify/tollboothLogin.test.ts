/**
 * What `tollboothLogin` (tollbooth/fastify) refuses at construction: its options, checked naming this guard. Its
 * behaviour on Fastify runs with node:http's and Express' in test/integration/httpGuards/login.test.ts.
 */
import { describe, expect, it } from 'vitest'
import { MemoryStore } from '../../../src/core/stores/memoryStore.js'
import { tollboothLogin } from '../../../src/fastify/index.js'
import { emailOf, invalidOption, limiters } from '../../helpers/loginApp.js'

describe('tollboothLogin options', () => {
  const store = new MemoryStore()
  const base = () => ({ ...limiters(store, 'options'), account: emailOf })
  const invalid = invalidOption

  it('refuses unknown, mistyped and inconsistent options, naming this guard and the option', () => {
    expect(() => tollboothLogin({ ...base(), perIP: base().perIp } as never)).toThrow(
      invalid('tollboothLogin: unknown option "perIP" (did you mean "perIp"?)'),
    )
    expect(() => tollboothLogin({ ...base(), perAccount: base().perIp as never })).toThrow(
      invalid('tollboothLogin: "perAccount" must be a leakyBucket'),
    )
    expect(() => tollboothLogin({ ...base(), account: 'email' as never })).toThrow(
      invalid('tollboothLogin: "account" must be a function, got "email"'),
    )
    expect(() => tollboothLogin({ ...base(), identify: 'x-user' as never })).toThrow(
      invalid('tollboothLogin: "identify" must be a function'),
    )
    expect(() => tollboothLogin({ ...base(), ipv6Prefix: 200 })).toThrow(
      invalid('tollboothLogin: "ipv6Prefix"'),
    )
    expect(() => tollboothLogin(null as never)).toThrow(
      invalid('tollboothLogin: "options" must be an object'),
    )
  })
})
