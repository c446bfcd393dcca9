/**
 * The default `normalize` of the login guard: `' Alice@Example.COM '`, `'ａｌｉｃｅ@example.com'` and
 * `'al\u200Bice@example.com'` all count as `alice@example.com`. Idempotent: a normalized name normalizes to itself, so
 * a name stored normalized and looked up with this function meets the same budget.
 */
export function normalizeAccount(account: string): string {
  // Lone surrogates become U+FFFD, what a UTF-8 encoder (a database, a JSON parser) makes of them: the name is counted
  // as the lookup will see it, and never makes a key that cannot be written.
  const wellFormed = account.replace(LONE_SURROGATE, '\ufffd')
  // Invisible characters go before NFKC, so that none holds apart what NFKC composes (`e`, a zero-width joiner, then a
  // combining accent), and after each step that could bring one back. NFKC turns full-width letters and compatibility
  // spaces into ones lowercasing and trim understand; lowercasing can leave a sequence NFKC composes, hence NFKC again.
  const composed = strip(strip(wellFormed).normalize('NFKC'))
  return strip(composed.toLowerCase().normalize('NFKC')).trim()
}

function strip(text: string): string {
  return text.replace(INVISIBLE, '')
}

/**
 * Default-ignorable code points (zero-width spaces and joiners, soft hyphens, variation selectors, tags, fillers) and
 * control characters: many lookups ignore them, and each would otherwise open a fresh budget for the same account.
 */
const INVISIBLE = /[\p{Default_Ignorable_Code_Point}\p{Cc}]/gu

/** In a `u` regular expression a surrogate pair is one code point: `\p{Cs}` matches only the unpaired halves. */
const LONE_SURROGATE = /\p{Cs}/gu
