import { GraphQLError } from 'graphql'
import { describe, expect, it } from 'vitest'
import { isDeliberateGraphQLError } from '../../../../src/graphql/engine/deliberateError.js'

describe('isDeliberateGraphQLError', () => {
  it('holds for a GraphQLError that wraps nothing, or only GraphQLErrors', () => {
    const refusal = new GraphQLError('Sign in first.', { extensions: { code: 'UNAUTHENTICATED' } })
    expect(isDeliberateGraphQLError(refusal)).toBe(true)
    expect(isDeliberateGraphQLError(new GraphQLError('again', { originalError: refusal }))).toBe(true)
    class AuthError extends GraphQLError {}
    expect(isDeliberateGraphQLError(new AuthError('Sign in first.'))).toBe(true)
  })

  it('fails for anything that is or wraps another error, and for what is not an error', () => {
    const failure = new Error('connect ECONNREFUSED')
    expect(isDeliberateGraphQLError(failure)).toBe(false)
    expect(isDeliberateGraphQLError(new GraphQLError('session store down', { originalError: failure }))).toBe(
      false,
    )
    const deep = new GraphQLError('outer', {
      originalError: new GraphQLError('inner', { originalError: failure }),
    })
    expect(isDeliberateGraphQLError(deep)).toBe(false)
    // Envelop's masking tells GraphQLErrors by name: a subclass renamed is masked there, so it is unexpected here.
    class SessionError extends GraphQLError {
      override name = 'SessionError'
    }
    expect(isDeliberateGraphQLError(new SessionError('session store 10.0.0.5 refused'))).toBe(false)
    expect(isDeliberateGraphQLError('Sign in first.')).toBe(false)
    expect(isDeliberateGraphQLError(undefined)).toBe(false)
  })
})
