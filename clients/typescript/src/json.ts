/**
 * JSON parsing that keeps large integers exact.
 *
 * Fencing tokens go up to 2^64-1, far past what a JS number holds exactly
 * (2^53). `JSON.parse` would silently round `18446744073709551615` to
 * `18446744073709552000`, and a client that reports or re-sends a rounded
 * token is wrong about who owns a stream. This parser returns integers
 * outside the safe range as `bigint`; everything else is what `JSON.parse`
 * gives. Strings — the bulk of a read page — are still decoded by
 * `JSON.parse`, one slice each.
 */

import { ProtocolError } from "./errors.js";

const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;

export function parseJson(text: string): unknown {
  let i = 0;
  const fail = (what: string): never => {
    throw new ProtocolError(`invalid JSON (${what} at offset ${i}): ${text.slice(0, 200)}`);
  };
  const ws = (): void => {
    for (;;) {
      const c = text.charCodeAt(i);
      if (c === 32 || c === 9 || c === 10 || c === 13) i++;
      else return;
    }
  };
  const str = (): string => {
    let from = i + 1;
    for (;;) {
      const q = text.indexOf('"', from);
      if (q < 0) return fail("unterminated string");
      let backslashes = 0;
      for (let k = q - 1; k > i && text.charCodeAt(k) === 92; k--) backslashes++;
      if (backslashes % 2 === 0) {
        const s = JSON.parse(text.slice(i, q + 1)) as string;
        i = q + 1;
        return s;
      }
      from = q + 1;
    }
  };
  const num = (): number | bigint => {
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(text);
    if (!m) return fail("unexpected character");
    i = NUMBER.lastIndex;
    const literal = m[0];
    const n = Number(literal);
    if (m[1] === undefined && m[2] === undefined && !Number.isSafeInteger(n)) return BigInt(literal);
    return n;
  };
  const word = (w: string, v: unknown): unknown => {
    if (text.startsWith(w, i)) {
      i += w.length;
      return v;
    }
    return fail("unexpected word");
  };
  const value = (): unknown => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const obj: Record<string, unknown> = {};
      ws();
      if (text[i] === "}") {
        i++;
        return obj;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail("expected a key");
        const key = str();
        ws();
        if (text[i++] !== ":") fail("expected ':'");
        obj[key] = value();
        ws();
        const sep = text[i++];
        if (sep === "}") return obj;
        if (sep !== ",") fail("expected ',' or '}'");
      }
    }
    if (c === "[") {
      i++;
      const arr: unknown[] = [];
      ws();
      if (text[i] === "]") {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(value());
        ws();
        const sep = text[i++];
        if (sep === "]") return arr;
        if (sep !== ",") fail("expected ',' or ']'");
      }
    }
    if (c === '"') return str();
    if (c === "t") return word("true", true);
    if (c === "f") return word("false", false);
    if (c === "n") return word("null", null);
    return num();
  };
  const v = value();
  ws();
  if (i !== text.length) fail("trailing characters");
  return v;
}
