/**
 * `value` split at `delimiter` outside quoted strings, each part trimmed. Enough of RFC 9651 for RateLimit: the
 * members of a List at ',', an item's bare item and parameters at ';' (a quoted name or value may hold either).
 */
export function splitOutsideQuotes(value: string, delimiter: ',' | ';'): string[] {
  const parts: string[] = []
  let start = 0
  let quoted = false
  for (let i = 0; i < value.length; i++) {
    const c = value[i]
    if (quoted) {
      if (c === '\\') i++
      else if (c === '"') quoted = false
    } else if (c === '"') {
      quoted = true
    } else if (c === delimiter) {
      parts.push(value.slice(start, i).trim())
      start = i + 1
    }
  }
  parts.push(value.slice(start).trim())
  return parts
}
