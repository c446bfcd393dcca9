/**
 * The schema and resolvers every contender of bench:graphql serves (Yoga and Apollo alike), and the cost settings
 * tollbooth is given for it. Resolvers build rows synchronously: what is measured is the server and its plugins,
 * not a data source.
 */
import type { TollboothGraphQLOptions } from 'tollbooth/graphql'

export const typeDefs = /* GraphQL */ `
  type Query {
    hello: String!
    user(id: ID!): User
    users(first: Int = 10, after: ID): [User!]!
    post(id: ID!): Post
  }
  type User {
    id: ID!
    name: String!
    email: String
    friends(first: Int = 5): [User!]!
    posts(first: Int = 5): [Post!]!
  }
  type Post {
    id: ID!
    title: String!
    body: String
    author: User
  }
`

interface UserRow {
  id: string
  name: string
  email: string
}
interface PostRow {
  id: string
  title: string
  body: string
  authorId: string
}

/** Lists never hold more than this, whatever `first` asks (as a real resolver would cap a page). */
const MAX_PAGE = 100

const userRow = (id: string): UserRow => ({ id, name: `User ${id}`, email: `user${id}@example.com` })
const postRow = (id: string): PostRow => ({
  id,
  title: `Post ${id}`,
  body: 'Lorem ipsum dolor sit amet.',
  authorId: String(Number(id) % 97),
})
const page = <T>(first: number, row: (i: number) => T): T[] =>
  Array.from({ length: Math.max(0, Math.min(first, MAX_PAGE)) }, (_, i) => row(i))

export const resolvers = {
  Query: {
    hello: () => 'world',
    user: (_: unknown, args: { id: string }) => userRow(args.id),
    // `after` is a cursor: the users that follow that id.
    users: (_: unknown, args: { first: number; after?: string | null }) => {
      const start = args.after == null ? 0 : Number(args.after) + 1
      return page(args.first, (i) => userRow(String(start + i)))
    },
    post: (_: unknown, args: { id: string }) => postRow(args.id),
  },
  User: {
    friends: (user: UserRow, args: { first: number }) =>
      page(args.first, (i) => userRow(String((Number(user.id) * 7 + i + 1) % 10_000))),
    posts: (user: UserRow, args: { first: number }) =>
      page(args.first, (i) => postRow(`${user.id}${String(i).padStart(2, '0')}`)),
  },
  Post: {
    author: (post: PostRow) => userRow(post.authorId),
  },
}

/** Slicing arguments, so tollbooth prices `users(first: $n)` by `$n` (and caches a cost per value of `$n`). */
export const costs: TollboothGraphQLOptions['costs'] = {
  'Query.users': { listSize: { slicingArguments: ['first'] } },
  'User.friends': { listSize: { slicingArguments: ['first'] } },
  'User.posts': { listSize: { slicingArguments: ['first'] } },
}

/** tollbooth's budget in the bench: far beyond what the load can spend, so nothing is refused. */
export const BUDGET = { capacity: 1_000_000_000, refillPerSecond: 1_000_000 }

/** The header the load generator puts each request's identity in, read by `identify`. */
export const IDENTITY_HEADER = 'x-bench-user'
