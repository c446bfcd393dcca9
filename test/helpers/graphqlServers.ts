/**
 * The two GraphQL servers tollbooth protects, as drivers one behaviour suite runs against: graphql-yoga 5 with
 * `useTollbooth` on a `node:http` server, and Apollo Server 5 with `tollboothApolloPlugin` on
 * `startStandaloneServer`. Both listen on 127.0.0.1, port 0, and are answered over `fetch`; `closeServers()` (in an
 * `afterEach`) closes every server started since it last ran.
 *
 * The schema is the small one of test/helpers/yogaSchema.ts unless a test gives its own; its resolvers count their
 * calls in `calls`, so a refusal can be shown to have run no resolver on either server.
 */
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import {
  ApolloServer,
  type ApolloServerOptions,
  type ApolloServerPlugin,
  type BaseContext,
} from '@apollo/server'
import { unwrapResolverError } from '@apollo/server/errors'
import { startStandaloneServer } from '@apollo/server/standalone'
import { GraphQLError, type GraphQLFormattedError, type GraphQLSchema } from 'graphql'
import { createYoga, maskError, type Plugin } from 'graphql-yoga'
import { tollboothApolloPlugin } from '../../src/graphql/apollo/index.js'
import {
  type CostExtension,
  type GraphQLContext,
  type TollboothGraphQLOptions,
  useTollbooth,
} from '../../src/graphql/index.js'
import { createTestSchema, type ResolverCalls, resolverCalls } from './yogaSchema.js'

export interface ErrorBody {
  message: string
  path?: (string | number)[]
  extensions?: Record<string, unknown>
}

export interface ResultBody {
  // biome-ignore lint/suspicious/noExplicitAny: response data is indexed freely and checked by `expect`
  data?: any
  errors?: ErrorBody[]
  extensions?: { cost?: CostExtension } & Record<string, unknown>
}

export interface Reply<T = ResultBody> {
  status: number
  headers: Headers
  body: T
}

export interface Operation {
  query: string
  variables?: Record<string, unknown>
  operationName?: string
}

/** POSTs one operation, or a batch, as JSON; the answer must be JSON. */
export async function post<T = ResultBody>(
  url: string,
  body: Operation | Operation[],
  headers: Record<string, string> = {},
): Promise<Reply<T>> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
    body: JSON.stringify(body),
  })
  const text = await response.text()
  let parsed: T
  try {
    parsed = JSON.parse(text) as T
  } catch {
    throw new Error(`HTTP ${response.status}, not JSON: ${text}`)
  }
  return { status: response.status, headers: response.headers, body: parsed }
}

/** One line the server logged (Apollo's `logger`; Yoga runs with `logging: false`). */
export interface LogLine {
  level: 'debug' | 'info' | 'warn' | 'error'
  message: string
}

export interface TestServer<TCalls = ResolverCalls> {
  readonly kind: ServerKind
  /** Where operations are POSTed. */
  readonly url: string
  /** The resolver calls the schema counted. */
  readonly calls: TCalls
  /**
   * What the server masked as an unexpected error, as thrown (Yoga's `maskError`, Apollo's `formatError`), and
   * Apollo's error logs: a plugin that throws something else than a refusal shows here.
   */
  readonly unexpected: unknown[]
  /** Every line Apollo logged (empty for Yoga). */
  readonly logs: LogLine[]
  post<T = ResultBody>(body: Operation | Operation[], headers?: Record<string, string>): Promise<Reply<T>>
}

export type ServerKind = 'yoga' | 'apollo'

/** What every driver takes besides the plugin's options. */
export interface ServerSetup<TCalls = ResolverCalls> {
  /** The schema served and the counts its resolvers keep; test/helpers/yogaSchema.ts's by default. */
  served?: { schema: GraphQLSchema; calls: TCalls }
  /** HTTP batching (Yoga's `batching`, Apollo's `allowBatchedHttpRequests`). */
  batching?: boolean
}

export interface YogaSetup<TCalls = ResolverCalls> extends ServerSetup<TCalls> {
  /** Yoga plugins listed before `useTollbooth`. */
  pluginsBefore?: Plugin[]
  /** Yoga plugins listed after `useTollbooth`. */
  pluginsAfter?: Plugin[]
}

export interface ApolloSetup<TCalls = ResolverCalls> extends ServerSetup<TCalls> {
  /** Apollo plugins listed before `tollboothApolloPlugin`. */
  pluginsBefore?: ApolloServerPlugin<BaseContext>[]
  /** Apollo plugins listed after `tollboothApolloPlugin`. */
  pluginsAfter?: ApolloServerPlugin<BaseContext>[]
  /** The GraphQL context of each request: `{ req }` (the Node request) by default, as the plugin's docs say. */
  context?: (http: { req: IncomingMessage }) => Promise<GraphQLContext>
  /** Runs after the driver's own `formatError` (which masks unexpected errors as Apollo's docs recommend). */
  formatError?: (formatted: GraphQLFormattedError, error: unknown) => GraphQLFormattedError
  /** Apollo's own document cache (`documentStore`); Apollo's default when absent. */
  documentStore?: ApolloServerOptions<BaseContext>['documentStore']
}

/** How to close each server started since the last `closeServers()`. */
const closers: (() => Promise<void>)[] = []
/** The servers started since the last `closeServers()`. */
const started: TestServer<unknown>[] = []

/** Closes every server started since the last call (every connection too) and answers them. */
export async function closeServers(): Promise<TestServer<unknown>[]> {
  const closing = closers.splice(0)
  await Promise.all(closing.map((close) => close()))
  return started.splice(0)
}

function servedBy<TCalls>(setup: ServerSetup<TCalls>): { schema: GraphQLSchema; calls: TCalls } {
  if (setup.served !== undefined) return setup.served
  const calls = resolverCalls()
  return { schema: createTestSchema(calls), calls: calls as TCalls }
}

/** `useTollbooth(options)` in graphql-yoga on a listening `node:http` server. */
export async function startYoga<TCalls = ResolverCalls>(
  options: TollboothGraphQLOptions,
  setup: YogaSetup<TCalls> = {},
): Promise<TestServer<TCalls>> {
  const { schema, calls } = servedBy(setup)
  const unexpected: unknown[] = []
  const yoga = createYoga({
    schema,
    logging: false,
    batching: setup.batching ?? false,
    maskedErrors: {
      // Yoga's own masking; what it masks is kept to see what a plugin threw.
      maskError: (error, message, isDev) => {
        const masked = maskError(error, message, isDev)
        if (masked !== error) unexpected.push((error as { originalError?: unknown }).originalError ?? error)
        return masked
      },
    },
    plugins: [...(setup.pluginsBefore ?? []), useTollbooth(options), ...(setup.pluginsAfter ?? [])],
  })
  const server = createServer(yoga)
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`
  const testServer: TestServer<TCalls> = {
    kind: 'yoga',
    url,
    calls,
    unexpected,
    logs: [],
    post: (body, headers) => post(url, body, headers),
  }
  started.push(testServer)
  return testServer
}

/** Apollo's logger, writing into `logs` (and every error into `unexpected`). */
function capturingLogger(logs: LogLine[], unexpected: unknown[]) {
  const line = (level: LogLine['level']) => (message?: unknown) => {
    logs.push({ level, message: String(message) })
    if (level === 'error') unexpected.push(message)
  }
  return { debug: line('debug'), info: line('info'), warn: line('warn'), error: line('error') }
}

/**
 * The Apollo server of `tollboothApolloPlugin(options)` on `startStandaloneServer` (its HTTP server is drained and
 * closed by `stop()`), with the Node request in the context. No stack traces in error responses, as in production.
 */
export async function startApollo<TCalls = ResolverCalls>(
  options: TollboothGraphQLOptions,
  setup: ApolloSetup<TCalls> = {},
): Promise<TestServer<TCalls>> {
  const { schema, calls } = servedBy(setup)
  const unexpected: unknown[] = []
  const logs: LogLine[] = []
  const server = new ApolloServer<BaseContext>({
    schema,
    logger: capturingLogger(logs, unexpected),
    includeStacktraceInErrorResponses: false,
    allowBatchedHttpRequests: setup.batching ?? false,
    ...(setup.documentStore === undefined ? {} : { documentStore: setup.documentStore }),
    formatError: (formatted, error) => {
      // Apollo's recipe for masking: what is not a GraphQLError (thrown by a resolver or a plugin) is hidden.
      const masked = isExpected(error) ? formatted : maskedError(formatted, error, unexpected)
      return setup.formatError === undefined ? masked : setup.formatError(masked, error)
    },
    plugins: [...(setup.pluginsBefore ?? []), tollboothApolloPlugin(options), ...(setup.pluginsAfter ?? [])],
  })
  const { url } = await startStandaloneServer(server, {
    listen: { port: 0, host: '127.0.0.1' },
    context: setup.context ?? (async ({ req }) => ({ req })),
  })
  // Apollo refuses to stop a server that failed to start: only a started one is stopped.
  closers.push(() => server.stop())
  const testServer: TestServer<TCalls> = {
    kind: 'apollo',
    url,
    calls,
    unexpected,
    logs,
    post: (body, headers) => post(url, body, headers),
  }
  started.push(testServer)
  return testServer
}

/**
 * Whether Apollo formats `error` as the client may see it: a GraphQLError (a refusal, a validation error) that does
 * not wrap something else thrown (by a resolver, or by a plugin, which Apollo wraps without a path).
 */
function isExpected(error: unknown): boolean {
  const original = unwrapResolverError(error)
  if (!(original instanceof GraphQLError)) return false
  return original.originalError === undefined || original.originalError instanceof GraphQLError
}

/** Masked as Yoga masks it (message and extensions hidden, path kept); what was thrown is kept in `unexpected`. */
function maskedError(
  formatted: GraphQLFormattedError,
  error: unknown,
  unexpected: unknown[],
): GraphQLFormattedError {
  const original = unwrapResolverError(error)
  unexpected.push(original instanceof GraphQLError ? (original.originalError ?? original) : original)
  return { ...formatted, message: 'Unexpected error.', extensions: { code: 'INTERNAL_SERVER_ERROR' } }
}

/** A server and what differs between the two where Apollo deliberately answers otherwise (docs: apollo-api). */
export interface GraphQLServerDriver {
  readonly kind: ServerKind
  readonly name: string
  /** The plugin's name, as its option errors start. */
  readonly pluginName: 'useTollbooth' | 'tollboothApolloPlugin'
  /**
   * A batch over `limits.maxBatchSize`: Yoga answers one refusal; Apollo runs each operation of a batch on its own
   * and answers an array holding one refusal per operation (both with status 413).
   */
  readonly batchRefusal: 'single' | 'perOperation'
  /**
   * The status of a batch in which a structural rule refused an operation: Yoga answers a batch 200 whatever its
   * results hold; Apollo merges the status of an error thrown before execution into the batch's (as for its own
   * validation errors), and the rules throw theirs in `didResolveOperation`.
   */
  readonly batchStatusWithRuleRefusal: 200 | 400
  start<TCalls = ResolverCalls>(
    options: TollboothGraphQLOptions,
    setup?: ServerSetup<TCalls>,
  ): Promise<TestServer<TCalls>>
  /** Builds the plugin alone: option errors throw here on both servers. */
  plugin(options: TollboothGraphQLOptions): unknown
  /**
   * Builds and starts a server of `schema` without listening, and answers what startup threw (Yoga: `createYoga`;
   * Apollo: `server.start()` rejects), or undefined.
   */
  startupError(options: TollboothGraphQLOptions, schema: GraphQLSchema): Promise<unknown>
  /** A header of the request behind a GraphQL context, as `identify` or `limiter` would read it. */
  requestHeader(context: GraphQLContext, name: string): string | undefined
}

export const yogaDriver: GraphQLServerDriver = {
  kind: 'yoga',
  name: 'useTollbooth in Yoga',
  pluginName: 'useTollbooth',
  batchRefusal: 'single',
  batchStatusWithRuleRefusal: 200,
  start: (options, setup) => startYoga(options, setup),
  plugin: (options) => useTollbooth(options),
  async startupError(options, schema) {
    try {
      createYoga({ schema, logging: false, plugins: [useTollbooth(options)] })
    } catch (error) {
      return error
    }
    return undefined
  },
  requestHeader: (context, name) => (context.request as Request).headers.get(name) ?? undefined,
}

export const apolloDriver: GraphQLServerDriver = {
  kind: 'apollo',
  name: 'tollboothApolloPlugin in Apollo Server',
  pluginName: 'tollboothApolloPlugin',
  batchRefusal: 'perOperation',
  batchStatusWithRuleRefusal: 400,
  start: (options, setup) => startApollo(options, setup),
  plugin: (options) => tollboothApolloPlugin(options),
  async startupError(options, schema) {
    const logs: LogLine[] = []
    const server = new ApolloServer({
      schema,
      logger: capturingLogger(logs, []),
      plugins: [tollboothApolloPlugin(options)],
    })
    try {
      await server.start()
    } catch (error) {
      return error
    }
    await server.stop()
    return undefined
  },
  requestHeader: (context, name) => {
    const value = (context.req as IncomingMessage).headers[name.toLowerCase()]
    return Array.isArray(value) ? value.join(', ') : value
  },
}

export const graphqlServerDrivers: readonly GraphQLServerDriver[] = [yogaDriver, apolloDriver]
