import type { TestProject } from 'vitest/node'
import { startRedis, startRedisCluster } from './redisServer.js'

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string
    redisClusterNodes: { host: string; port: number }[]
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const [redis, cluster] = await Promise.all([startRedis(), startRedisCluster()])
  project.provide('redisUrl', redis.url)
  project.provide('redisClusterNodes', cluster.startupNodes)
  return async () => {
    await Promise.all([redis.stop(), cluster.stop()])
  }
}
