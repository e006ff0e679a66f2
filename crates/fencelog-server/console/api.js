// The console's HTTP calls: the same origin as the page (wherever the
// server is mounted), an access token when the server asks for one, JSON
// whose integers above 2^53 stay exact, and a live tail over SSE read with
// fetch (so it can send the token; EventSource cannot).

import { SseParser } from "./sse.js";

/** Where the API is: the page is at `${BASE}/console`. */
export const BASE = location.pathname.replace(/\/console(\/.*)?$/, "");
const TOKEN_KEY = "fencelog.console.token";
const TAIL_BACKOFF_MS = [250, 500, 1000, 2000, 5000];

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = body?.error ?? "http_error";
    this.body = body;
  }
}

/** JSON.parse, keeping integers past 2^53 exact as BigInt (tokens are u64). */
export function parseJson(text) {
  return JSON.parse(text, (_key, value, context) => {
    if (typeof value === "number" && !Number.isSafeInteger(value) && /^\d+$/.test(context?.source ?? "")) {
      return BigInt(context.source);
    }
    return value;
  });
}

let pendingAsk = null;

/**
 * Shows the token dialog once, however many calls are waiting on it, with
 * `why` above the scopes it explains. A token entered replaces the stored
 * one; a dialog dismissed (Escape) keeps it. Resolves when it closes.
 */
export function askToken(why) {
  if (pendingAsk) return pendingAsk;
  const dialog = document.getElementById("auth");
  document.getElementById("auth-why").textContent = why;
  const input = document.getElementById("auth-token");
  input.value = "";
  dialog.returnValue = "";
  pendingAsk = new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        if (dialog.returnValue === "ok") sessionStorage.setItem(TOKEN_KEY, input.value.trim());
        pendingAsk = null;
        resolve();
      },
      { once: true },
    );
  });
  dialog.showModal();
  return pendingAsk;
}

/** A fetch of `path` under BASE; asks for a token while the answer is 401. */
export async function request(path, { params = {}, headers = {}, signal } = {}) {
  const url = new URL(BASE + path, location.origin);
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, String(v));
  }
  for (;;) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    const h = { ...headers };
    if (token) h.authorization = `Bearer ${token}`;
    const resp = await fetch(url, { headers: h, signal, cache: "no-store" });
    if (resp.status !== 401) return resp;
    const body = await resp.json().catch(() => null);
    await askToken(
      token
        ? `The server refused that token (${body?.message ?? "401"}). Enter another one.`
        : "This server asks for an access token.",
    );
  }
}

async function answer(resp) {
  const text = await resp.text();
  let body = null;
  try {
    body = parseJson(text);
  } catch {
    if (resp.ok) throw new ApiError(resp.status, { error: "protocol", message: "the answer is not JSON" });
  }
  if (!resp.ok) throw new ApiError(resp.status, body);
  return body;
}

export async function getJson(path, params, signal) {
  return answer(await request(path, { params, signal }));
}

export async function getText(path, signal) {
  const resp = await request(path, { signal });
  if (!resp.ok) return answer(resp);
  return resp.text();
}

export const streamPath = (name) => `/v1/streams/${encodeURIComponent(name)}`;

let routes = null;

/**
 * Whether the server has a route (`"get /v1/streams/{stream}/fences"`),
 * from its OpenAPI document: newer servers have more, and asking for a
 * route that is not there would only log a 404.
 */
export async function hasRoute(methodAndPath) {
  routes ??= getJson("/v1/openapi.json").then((doc) =>
    Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`)),
  );
  return (await routes).includes(methodAndPath);
}

/**
 * Follows `stream` from `startSeq`: `onRecords(records)` for each batch in
 * seq order, `onStatus("connecting" | "live" | "reconnecting" | "stopped",
 * error?)`. Reconnects with backoff (the server restarting ends the
 * stream) and resumes after the last record delivered. Returns `stop()`.
 */
export function tail(stream, startSeq, { onRecords, onStatus }) {
  const abort = new AbortController();
  let next = startSeq;
  let failures = 0;
  const deliver = (ev) => {
    if (ev.event === "records") {
      const records = parseJson(ev.data).filter((r) => r.seq >= next);
      if (records.length) {
        next = records[records.length - 1].seq + 1;
        onRecords(records);
      }
    } else if (ev.event === "caught_up") {
      onStatus("live");
    } else if (ev.event === "error") {
      throw new ApiError(500, parseJson(ev.data));
    }
  };
  const once = async () => {
    onStatus(failures ? "reconnecting" : "connecting");
    const resp = await request(`${streamPath(stream)}/records`, {
      params: { start_seq: next },
      headers: { accept: "text/event-stream", "last-event-id": String(next) },
      signal: abort.signal,
    });
    if (!resp.ok) await answer(resp);
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    const parser = new SseParser();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      failures = 0;
      for (const ev of parser.push(value)) deliver(ev);
    }
  };
  (async () => {
    while (!abort.signal.aborted) {
      try {
        await once();
      } catch (e) {
        if (abort.signal.aborted) break;
        // A request the server refuses will be refused again: stop.
        if (e instanceof ApiError && e.status >= 400 && e.status < 500) {
          onStatus("stopped", e);
          return;
        }
      }
      if (abort.signal.aborted) break;
      const wait = TAIL_BACKOFF_MS[Math.min(failures, TAIL_BACKOFF_MS.length - 1)];
      failures++;
      onStatus("reconnecting");
      await new Promise((r) => setTimeout(r, wait));
    }
    onStatus("stopped");
  })();
  return () => abort.abort();
}
