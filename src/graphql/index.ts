/**
 * tollbooth/graphql — the Yoga/Envelop plugin. Not built yet (see the GraphQL issue); this entry point exists so the
 * package's `exports` map is stable. The core it will use is re-exported for convenience.
 */
export { tokenBucket } from '../core/limiters/tokenBucket.js'
