/**
 * The name the GraphQL plugins' option errors begin with (`useTollbooth: "minCost" must be …`). The checks are
 * shared by both plugins, the cost model's and the field limits' included, and name the Yoga plugin;
 * `tollboothApolloPlugin` renames the errors raised while it is built or shown a schema (`renamedErrors`).
 */
export const GRAPHQL_OPTIONS_OWNER = 'useTollbooth'
