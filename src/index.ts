/** tollbooth — the limiter core: algorithms, stores, fail policy, and the helpers both adapters use. */

export * from './core/headers.js'
export * from './core/index.js'
export * from './identity/index.js'
