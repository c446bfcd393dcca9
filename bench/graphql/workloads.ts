/**
 * The loads bench:graphql offers each contender: which requests, from how many identities, over how many
 * connections. Every identity has one prebuilt request (its body fixed by the identity's index), and autocannon's
 * connections cycle through them.
 */

export type WorkloadName = 'light' | 'heavy'
export const WORKLOAD_NAMES: readonly WorkloadName[] = ['light', 'heavy']

export interface GraphQLRequestBody {
  query: string
  operationName?: string
  variables?: Record<string, unknown>
}

export interface Workload {
  readonly name: WorkloadName
  /** One line on what the requests are, for the report. */
  readonly description: string
  readonly connections: number
  /** Distinct values of the identity header, one prebuilt request each. */
  readonly identities: number
  /** The request of the i-th identity. */
  requestBody(i: number): GraphQLRequestBody
  /** How many consecutive `requestBody` indexes hold every distinct query of the mix (the check sends those). */
  readonly distinctQueries: number
}

const USERS_QUERY = /* GraphQL */ `
  query Users($n: Int!) {
    users(first: $n) {
      id
      name
      posts(first: 5) {
        id
        title
      }
    }
  }
`
const USER_QUERY = /* GraphQL */ `
  query User($id: ID!) {
    user(id: $id) {
      id
      name
      email
    }
  }
`
const HELLO_QUERY = '{ hello }'
const POST_QUERY = /* GraphQL */ `
  query Post($id: ID!) {
    post(id: $id) {
      ...PostFields
      author {
        ...UserFields
      }
    }
  }
  fragment PostFields on Post {
    id
    title
    body
  }
  fragment UserFields on User {
    id
    name
  }
`

/** Four small queries in turn (lists of 5 to 20 users, one user, `hello`, a post with fragments). */
const light: Workload = {
  name: 'light',
  description:
    '4 queries in turn: users(first: 5|10|20) with posts(first: 5), user(id), { hello }, post(id) with fragments',
  connections: 50,
  identities: 1000,
  distinctQueries: 4,
  requestBody(i) {
    switch (i % 4) {
      case 0:
        return { query: USERS_QUERY, operationName: 'Users', variables: { n: [5, 10, 20][(i >> 2) % 3] } }
      case 1:
        return { query: USER_QUERY, operationName: 'User', variables: { id: String(i) } }
      case 2:
        return { query: HELLO_QUERY }
      default:
        return { query: POST_QUERY, operationName: 'Post', variables: { id: String(i) } }
    }
  },
}

const PAGE_QUERY = /* GraphQL */ `
  query Page($n: Int!, $after: ID) {
    users(first: $n, after: $after) {
      id
      name
      email
      friends(first: 5) {
        id
        name
      }
      posts(first: 3) {
        id
        title
        body
      }
    }
  }
`

/**
 * One larger response per request: a page of 10 users with 5 friends and 3 posts each (about 4 kB of JSON, 90
 * objects). `$n`, the slicing argument the cost depends on, is 10 for every request, so the estimate is one cost
 * cache entry; the cursor `$after` differs per identity, so the variables themselves never repeat from one
 * identity to the next, as on a real page-through.
 */
const heavy: Workload = {
  name: 'heavy',
  description:
    'users(first: $n) { id name email friends(first: 5) { id name } posts(first: 3) { id title body } }, ' +
    '$n = 10, $after a cursor per identity',
  connections: 32,
  identities: 100,
  distinctQueries: 1,
  requestBody(i) {
    return { query: PAGE_QUERY, operationName: 'Page', variables: { n: 10, after: String(i * 10) } }
  },
}

export const WORKLOADS: Record<WorkloadName, Workload> = { light, heavy }
