/**
 * A NestJS application of the tests, on Express (@nestjs/platform-express) or Fastify (@nestjs/platform-fastify),
 * listening on a free loopback port. `abortOnError: false`: a module that fails to start rejects instead of ending
 * the test process.
 */
import 'reflect-metadata'
import type { INestApplication, LoggerService, Type } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { FastifyAdapter } from '@nestjs/platform-fastify'

export type NestPlatform = 'express' | 'fastify'
export const nestPlatforms: readonly NestPlatform[] = ['express', 'fastify']

export interface NestServer {
  readonly app: INestApplication
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  readonly port: number
  close(): Promise<void>
}

export interface NestServerOptions {
  /** Nest's logger: none unless given (a test that reads what Nest logs gives its own). */
  readonly logger?: LoggerService
  /** Called on the application before it listens (adapters, global filters). */
  readonly configure?: (app: INestApplication) => void
}

export async function startNest(
  platform: NestPlatform,
  module: Type<unknown>,
  { logger, configure }: NestServerOptions = {},
): Promise<NestServer> {
  const options = { logger: logger ?? false, abortOnError: false } as const
  const app =
    platform === 'fastify'
      ? await NestFactory.create(module, new FastifyAdapter(), options)
      : await NestFactory.create(module, options)
  configure?.(app)
  await app.listen(0, '127.0.0.1')
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1')
  return {
    app,
    url,
    port: Number(new URL(url).port),
    close: () => app.close(),
  }
}

/** A logger that keeps what Nest logs as warnings and errors, for a test to read. */
export class RecordingLogger implements LoggerService {
  readonly warnings: unknown[] = []
  readonly errors: unknown[] = []
  log(): void {}
  warn(message: unknown): void {
    this.warnings.push(message)
  }
  error(message: unknown): void {
    this.errors.push(message)
  }
}
