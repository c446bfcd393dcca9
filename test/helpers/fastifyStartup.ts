import Fastify, { type FastifyPluginAsync } from 'fastify'
import { expect } from 'vitest'

/** The route the plugin's route-level options are given on: its method, its path and the `config` key they go under. */
export interface ConfiguredRoute {
  readonly method: 'GET' | 'POST'
  readonly url: string
  readonly configKey: string
}

/**
 * Registers `plugin` with `options` on a new Fastify app, adds `route` with `routeConfig` under its config key, and
 * answers what `ready()` rejects with (failing the test when it does not reject). The app is closed.
 */
export async function fastifyStartupError(
  plugin: FastifyPluginAsync<never>,
  options: unknown,
  route: ConfiguredRoute,
  routeConfig?: unknown,
): Promise<{ code: string; message: string }> {
  const app = Fastify({ logger: false })
  const start = async () => {
    await app.register(plugin, options as never)
    app.route({
      method: route.method,
      url: route.url,
      config: { [route.configKey]: routeConfig },
      handler: async () => ({}),
    })
    await app.ready()
  }
  const error = await start().then(
    () => undefined,
    (rejection: unknown) => rejection,
  )
  await app.close().catch(() => {})
  expect(error).toBeInstanceOf(Error)
  return { code: (error as { code: string }).code, message: (error as Error).message }
}
