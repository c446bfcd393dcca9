/**
 * Records the cost vectors of the tests that price SDL schemas (see costVectorRecorder.ts), then collects them into
 * test/fixtures/cost/sdl-vectors.json, which test/unit/graphql/cost/extensionTwins.test.ts prices again on each
 * schema's code-first twin:
 *
 *   TOLLBOOTH_COST_VECTORS=/tmp/vectors.jsonl npx vitest run -c test/helpers/recordCostVectors.config.ts \
 *     --no-file-parallelism test/unit/graphql/cost/{costAnalyzer,costModel,deferredFragments,fieldMerging}.test.ts \
 *     test/unit/graphql/cost/{recursiveInputWeights,refundRuntimeType,refundWalk}.test.ts test/unit/cli/cost.test.ts \
 *     test/integration/graphql/{chargedWork,incrementalDelivery,fieldLimitRuns,responseCache,subscriptions}.test.ts \
 *     test/integration/ipNetworks.test.ts
 *   node --import tsx test/helpers/collectCostVectors.ts /tmp/vectors.jsonl
 *
 * (The recorder reads each response it records: the refundWalk tests that count the reads of a response fail under
 * it, after their prices are recorded.)
 */
import { defineConfig, mergeConfig } from 'vitest/config'
import base from '../../vitest.config.js'

export default mergeConfig(
  base,
  defineConfig({ test: { setupFiles: ['test/helpers/costVectorRecorder.ts'] } }),
)
