/**
 * The example server's GraphQL API (see examples/server.ts): a fixed in-memory data set (60 users with 12 posts
 * each, 3 comments per post), the demo users' tokens, a `login` mutation, a chat shared with the `/chat` WebSocket,
 * and two subscriptions. The cost directives (`@cost`, `@listSize`, `@rateLimit`) are what tollbooth prices.
 */
import { setMaxListeners } from 'node:events'
import { createPubSub, createSchema } from 'graphql-yoga'
import { costDirectivesTypeDefs } from '../src/graphql/index.js'

export interface DemoUser {
  readonly id: string
  readonly name: string
  readonly email: string
  readonly password: string
  /** What `authorization: Bearer <token>` (or `?token=` on a WebSocket upgrade) sends. */
  readonly token: string | undefined
}

/** The accounts one can log in as; their tokens are printed at startup. */
export const demoUsers: readonly DemoUser[] = [
  { id: 'u1', name: 'Alice', email: 'alice@example.com', password: 'wonderland', token: 'alice-token' },
  { id: 'u2', name: 'Bob', email: 'bob@example.com', password: 'builder', token: 'bob-token' },
  { id: 'u3', name: 'Carol', email: 'carol@example.com', password: 'singer', token: 'carol-token' },
]

export const USER_COUNT = 60
export const POSTS_PER_USER = 12
const COMMENTS_PER_POST = 3
const FRIENDS_PER_USER = 8

interface Post {
  readonly id: string
  readonly title: string
  readonly authorId: string
}

const users: DemoUser[] = [...demoUsers]
for (let i = users.length + 1; i <= USER_COUNT; i++) {
  users.push({
    id: `u${i}`,
    name: `User ${i}`,
    email: `user${i}@example.com`,
    password: '',
    token: undefined,
  })
}
const usersById = new Map(users.map((user) => [user.id, user]))
const topics = ['caching', 'queues', 'GraphQL', 'WebSockets', 'Redis', 'tracing']
const posts: Post[] = users.flatMap((user, u) =>
  Array.from({ length: POSTS_PER_USER }, (_, p) => ({
    id: `p${u * POSTS_PER_USER + p + 1}`,
    // Exactly 3 posts in the whole set mention rate limits: `search(text: "limit")` finds them.
    title:
      u < 3 && p === 0
        ? `${user.name} on rate limits`
        : `Notes on ${topics[(u + p) % topics.length]} #${p + 1}`,
    authorId: user.id,
  })),
)
const postsByAuthor = new Map<string, Post[]>()
for (const post of posts)
  postsByAuthor.set(post.authorId, [...(postsByAuthor.get(post.authorId) ?? []), post])

export function userByToken(token: string): DemoUser | undefined {
  return demoUsers.find((user) => user.token === token)
}

/** A chat message, from `/chat` or from `Mutation.postMessage`. */
export interface ChatMessage {
  readonly id: string
  readonly from: string
  readonly text: string
  readonly at: string
}

/**
 * Every `messageAdded` subscription is a listener of one EventTarget: past Node's default of 10 it would warn of a
 * leak. Their number is bounded by the subscription and connection caps instead.
 */
function subscribersTarget(): EventTarget {
  const target = new EventTarget()
  setMaxListeners(0, target)
  return target
}

/** The chat both `/chat` and GraphQL see: the last 50 messages, and a pub/sub for `messageAdded`. */
export class Chat {
  readonly pubSub = createPubSub<{ messageAdded: [ChatMessage] }>({ eventTarget: subscribersTarget() })
  private readonly recent: ChatMessage[] = []
  private readonly listeners = new Set<(message: ChatMessage) => void>()
  private serial = 0

  post(from: string, text: string): ChatMessage {
    const message = { id: `m${++this.serial}`, from, text, at: new Date().toISOString() }
    this.recent.push(message)
    if (this.recent.length > 50) this.recent.shift()
    for (const listener of this.listeners) listener(message)
    this.pubSub.publish('messageAdded', message)
    return message
  }

  last(count: number): ChatMessage[] {
    // slice(-0) would be the whole list
    return count > 0 ? this.recent.slice(-count) : []
  }

  onMessage(listener: (message: ChatMessage) => void): void {
    this.listeners.add(listener)
  }
}

const typeDefs = /* GraphQL */ `
  type Query {
    "The caller, from the bearer token; null when anonymous."
    me: User
    users(first: Int = 10): [User!]! @listSize(slicingArguments: ["first"])
    user(id: ID!): User
    posts(first: Int = 10): [Post!]! @listSize(slicingArguments: ["first"])
    "Full-text search: dear (5 per post), priced for a full page and refunded for what is not found."
    search(text: String!, first: Int = 10): [Post!]! @cost(weight: 5) @listSize(slicingArguments: ["first"])
    "The chat's last messages."
    messages(last: Int = 20): [Message!]! @listSize(slicingArguments: ["last"])
  }

  type User {
    id: ID!
    name: String!
    posts(first: Int = 5): [Post!]! @listSize(slicingArguments: ["first"])
    friends(first: Int = 5): [User!]! @listSize(slicingArguments: ["first"])
  }

  type Post {
    id: ID!
    title: String!
    author: User!
    comments(first: Int = 3): [Comment!]! @listSize(slicingArguments: ["first"])
  }

  type Comment {
    id: ID!
    text: String!
    author: User!
  }

  type Message {
    id: ID!
    from: String!
    text: String!
    at: String!
  }

  type Session {
    token: String!
    user: User!
  }

  type Mutation {
    "5 attempts per minute per client IP and e-mail; fails closed while the store is down."
    login(email: String!, password: String!): Session @rateLimit(limit: 5, window: "1m", by: ["email"])
    "Posts to the chat (also seen on /chat); signed-in users only."
    postMessage(text: String!): Message!
  }

  type Subscription {
    "Every chat message, from /chat and from postMessage."
    messageAdded: Message!
    "from, from - 1, …, 1, one every intervalMs, then the end."
    countdown(from: Int! = 3, intervalMs: Int = 200): Int!
  }
`

/** What the resolvers read from Yoga's context (see `context` in examples/server.ts). */
export interface DemoContext {
  readonly user: DemoUser | undefined
}

const take = <T>(items: readonly T[], first: number): T[] => items.slice(0, Math.max(0, Math.min(first, 100)))

export function createDemoSchema(chat: Chat) {
  return createSchema<DemoContext>({
    typeDefs: [costDirectivesTypeDefs, typeDefs],
    resolvers: {
      Query: {
        me: (_: unknown, _args: unknown, context: DemoContext) => context.user ?? null,
        users: (_: unknown, args: { first: number }) => take(users, args.first),
        user: (_: unknown, args: { id: string }) => usersById.get(args.id) ?? null,
        posts: (_: unknown, args: { first: number }) => take(posts, args.first),
        search: (_: unknown, args: { text: string; first: number }) => {
          const text = args.text.toLowerCase()
          return take(
            posts.filter((post) => post.title.toLowerCase().includes(text)),
            args.first,
          )
        },
        messages: (_: unknown, args: { last: number }) => chat.last(Math.min(args.last, 50)),
      },
      User: {
        posts: (user: DemoUser, args: { first: number }) =>
          take(postsByAuthor.get(user.id) ?? [], args.first),
        friends: (user: DemoUser, args: { first: number }) => {
          const index = users.indexOf(user)
          const friends = Array.from(
            { length: FRIENDS_PER_USER },
            (_, i) => users[(index + i + 1) % users.length] as DemoUser,
          )
          return take(friends, args.first)
        },
      },
      Post: {
        author: (post: Post) => usersById.get(post.authorId),
        comments: (post: Post, args: { first: number }) =>
          take(
            Array.from({ length: COMMENTS_PER_POST }, (_, i) => ({
              id: `${post.id}-c${i + 1}`,
              text: `Comment ${i + 1} on ${post.title}`,
              authorId: users[(Number(post.id.slice(1)) + i) % users.length]?.id,
            })),
            args.first,
          ),
      },
      Comment: {
        author: (comment: { authorId: string }) => usersById.get(comment.authorId),
      },
      Mutation: {
        login: (_: unknown, args: { email: string; password: string }) => {
          const user = demoUsers.find(
            (candidate) =>
              candidate.email === args.email.trim().toLowerCase() && candidate.password === args.password,
          )
          return user === undefined ? null : { token: user.token, user }
        },
        postMessage: (_: unknown, args: { text: string }, context: DemoContext) => {
          if (context.user === undefined) throw new Error('Sign in to post: authorization: Bearer <token>')
          return chat.post(context.user.name, args.text.slice(0, 1000))
        },
      },
      Subscription: {
        messageAdded: {
          subscribe: () => chat.pubSub.subscribe('messageAdded'),
          resolve: (message: ChatMessage) => message,
        },
        countdown: {
          subscribe: async function* (_: unknown, args: { from: number; intervalMs: number }) {
            const interval = Math.min(Math.max(args.intervalMs, 0), 10_000)
            for (let n = Math.min(args.from, 100); n >= 1; n--) {
              yield { countdown: n }
              if (n > 1) await new Promise((resolve) => setTimeout(resolve, interval))
            }
          },
        },
      },
    },
  })
}
