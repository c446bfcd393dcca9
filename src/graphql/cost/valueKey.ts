/**
 * A variable's value as the text of a price cache key, telling apart what the executor tells apart: JSON's text,
 * but with the numbers JSON cannot write spelled out at any depth (`Infinity`, which `JSON.parse` makes of `1e400`;
 * `NaN`; `-0`), where `JSON.stringify` would write `null` or `0` and so share the key of a price that is not theirs.
 * Undefined, not to be cached on, for a value no JSON request holds (an object of a class, such as the `File` of a
 * multipart upload; a function; a bigint) and once the key passes `maxLength` characters.
 */
export function withValueKey(key: string, value: unknown, maxLength: number): string | undefined {
  const out = appendValue(key, value, maxLength)
  return out !== undefined && out.length <= maxLength ? out : undefined
}

function appendValue(key: string, value: unknown, maxLength: number): string | undefined {
  if (key.length > maxLength) return undefined
  switch (typeof value) {
    case 'undefined':
      return `${key}~`
    case 'boolean':
      return `${key}${value}`
    case 'number':
      // String() gives JSON's text for every finite number, and names the others; -0 alone needs its sign.
      return `${key}${Object.is(value, -0) ? '-0' : String(value)}`
    case 'string':
      return key + JSON.stringify(value)
    case 'object': {
      if (value === null) return `${key}null`
      if (Array.isArray(value)) {
        let out: string | undefined = `${key}[`
        for (const item of value) {
          out = appendValue(out, item, maxLength)
          if (out === undefined) return undefined
          out += ','
        }
        return `${out}]`
      }
      const prototype = Object.getPrototypeOf(value)
      if (prototype !== Object.prototype && prototype !== null) return undefined
      let out: string | undefined = `${key}{`
      for (const [name, item] of Object.entries(value)) {
        out = appendValue(`${out}${JSON.stringify(name)}:`, item, maxLength)
        if (out === undefined) return undefined
        out += ','
      }
      return `${out}}`
    }
    default:
      return undefined
  }
}

/**
 * The variable `name` as the request sent it: undefined unless it is the object's own, so that an absent
 * `$__proto__` reads as absent, not as the `Object.prototype` every object inherits under that name.
 */
export function ownValue(
  variables: Readonly<Record<string, unknown>> | null | undefined,
  name: string,
): unknown {
  return variables != null && Object.hasOwn(variables, name) ? variables[name] : undefined
}
