// Formatting of what the API returns: record bodies as text or hex, times,
// sizes, tokens. Pure (no DOM), so the unit tests run it in Node.

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** A record's bytes: `body` is UTF-8 text, `body_base64` anything else. */
export function bodyBytes(record) {
  if (typeof record.body === "string") return new TextEncoder().encode(record.body);
  const raw = atob(record.body_base64 ?? "");
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}

/** The body as text, or null when it is not UTF-8. */
export function bodyText(record) {
  if (typeof record.body === "string") return record.body;
  try {
    return utf8.decode(bodyBytes(record));
  } catch {
    return null;
  }
}

const HEX_ROW_BYTES = 16;

/** `00000000  66 6f 6f 0a  |foo.|`, one line per 16 bytes, at most `maxRows`. */
export function hexDump(bytes, maxRows = 64) {
  const lines = [];
  for (let off = 0; off < bytes.length && lines.length < maxRows; off += HEX_ROW_BYTES) {
    const row = bytes.subarray(off, off + HEX_ROW_BYTES);
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = Array.from(row, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${off.toString(16).padStart(8, "0")}  ${hex.padEnd(HEX_ROW_BYTES * 3 - 1)}  |${ascii}|`);
  }
  const shown = lines.length * HEX_ROW_BYTES;
  if (bytes.length > shown) lines.push(`… ${bytes.length - shown} more bytes`);
  return lines.join("\n");
}

/** `1.5 KiB`. */
export function formatBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Number(n);
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${Math.round(v)} B` : `${v.toFixed(v < 10 ? 1 : 0)} ${units[u]}`;
}

/** A rate or a small quantity: 3 significant digits, no exponent. */
export function formatNumber(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  if (v === 0) return "0";
  const abs = Math.abs(v);
  if (abs >= 1000) return Math.round(v).toLocaleString("en-US");
  return Number(v.toPrecision(3)).toString();
}

/** Seconds as `850 µs`, `12.3 ms`, `1.20 s`. */
export function formatSeconds(s) {
  if (s === null || s === undefined || Number.isNaN(s)) return "–";
  if (s < 1e-3) return `${formatNumber(s * 1e6)} µs`;
  if (s < 1) return `${formatNumber(s * 1e3)} ms`;
  return `${formatNumber(s)} s`;
}

/** `2024-05-01 12:00:00.123` in local time; "never" for 0 (no record yet). */
export function formatTime(ms) {
  if (!ms) return "never";
  const d = new Date(Number(ms));
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`
  );
}

/** `5 s ago`, `3 min ago`, `2 h ago`, `4 d ago`. */
export function formatAgo(ms, now = Date.now()) {
  if (!ms) return "never";
  const s = Math.max(0, Math.round((now - Number(ms)) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

/**
 * A stable hue per token, so one owner's records look alike everywhere;
 * consecutive tokens (the usual takeover) land far apart on the wheel.
 */
export function tokenHue(token) {
  let n;
  try {
    n = Number(BigInt(token) % 360n);
  } catch {
    n = 0;
  }
  return Math.round((n * 137.508 + 200) % 360);
}
