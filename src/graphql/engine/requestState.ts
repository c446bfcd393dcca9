/**
 * What one HTTP request carries from operation to operation: the running cost of its batch, and the RateLimit
 * fields its response is to send. The adapter keeps one per HTTP request, where its server lets it (Yoga: the server
 * context; Apollo: the response head a batch shares); an operation without one (graphql-ws) is judged alone.
 */
export interface RequestState {
  batchCost: number
  /** The `RateLimit` and `RateLimit-Policy` field values of the request's last settled operation. */
  rateLimit: string | undefined
  rateLimitPolicy: string | undefined
}

export function newRequestState(): RequestState {
  return { batchCost: 0, rateLimit: undefined, rateLimitPolicy: undefined }
}
