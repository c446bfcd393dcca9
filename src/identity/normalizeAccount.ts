/** The default `normalize`: `' Alice@Example.COM '` and `'ａｌｉｃｅ@example.com'` both count as `alice@example.com`. */
export function normalizeAccount(account: string): string {
  // NFKC before trim: it turns full-width and other compatibility spaces into ones trim removes. Invisible
  // characters (zero-width spaces and joiners, soft hyphens, variation selectors) and control characters go: many
  // lookups ignore them, and each would otherwise open a fresh budget for the same account.
  return account.normalize('NFKC').replace(INVISIBLE, '').trim().toLowerCase()
}

/** Default-ignorable code points and control characters. */
const INVISIBLE = /[\p{Default_Ignorable_Code_Point}\p{Cc}]/gu
