/**
 * The small schema of the Yoga integration tests (test/integration/graphql/graphqlHttp.test.ts and its server worker,
 * test/helpers/yogaServerWorker.ts). No vitest here: the worker runs outside it.
 *
 * Eight users are stored; each has two friends. `users` and `friends` return fewer items than a large `first` asks
 * for, so the estimate (sized by `first`) is above what the response really holds and the difference is refunded.
 *
 * Costs in the cost-directive model (objects weigh 1, scalars 0, root mutation fields +10):
 * - `{ users(first: F) { id friends(first: G) { id } } }` costs (1 + G) × F; it really holds
 *   min(F, 8) × (1 + min(G, 2)).
 * - `mutation { login(...) }` and `mutation { ping }` cost 10 each (scalar result + the mutation's 10).
 */
import { createSchema } from 'graphql-yoga'
import { costDirectivesTypeDefs } from '../../src/graphql/index.js'

export const STORED_USERS = 8
export const FRIENDS_PER_USER = 2

/** How many times each resolver ran: a refused operation must leave every count unchanged. */
export interface ResolverCalls {
  users: number
  friends: number
  login: number
  ping: number
}

export function resolverCalls(): ResolverCalls {
  return { users: 0, friends: 0, login: 0, ping: 0 }
}

export function totalCalls(calls: ResolverCalls): number {
  return calls.users + calls.friends + calls.login + calls.ping
}

const typeDefs = /* GraphQL */ `
  type User {
    id: ID!
    name: String!
    friends(first: Int = 3): [User!]! @listSize(slicingArguments: ["first"])
  }

  type Query {
    users(first: Int = 10): [User!]! @listSize(slicingArguments: ["first"])
  }

  type Mutation {
    login(email: String!, password: String!): Boolean!
    ping: Int!
  }
`

interface UserRow {
  id: string
  name: string
}

const USERS: readonly UserRow[] = Array.from({ length: STORED_USERS }, (_, i) => ({
  id: `u${i + 1}`,
  name: `User ${i + 1}`,
}))

/** The test schema; every resolver call is counted in `calls`. */
export function createTestSchema(calls: ResolverCalls) {
  return createSchema({
    typeDefs: [costDirectivesTypeDefs, typeDefs],
    resolvers: {
      Query: {
        users: (_: unknown, { first }: { first: number }) => {
          calls.users++
          return USERS.slice(0, Math.max(0, first))
        },
      },
      User: {
        friends: (user: UserRow, { first }: { first: number }) => {
          calls.friends++
          const index = USERS.findIndex((row) => row.id === user.id)
          const friends = Array.from(
            { length: FRIENDS_PER_USER },
            (_, i) => USERS[(index + 1 + i) % USERS.length] as UserRow,
          )
          return friends.slice(0, Math.max(0, first))
        },
      },
      Mutation: {
        login: (_: unknown, { password }: { email: string; password: string }) => {
          calls.login++
          return password === 'correct horse'
        },
        ping: () => {
          calls.ping++
          return calls.ping
        },
      },
    },
  })
}
