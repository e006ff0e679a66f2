// The console's entry point: a hash router over three views (overview,
// streams, one stream) and the health badge. Each view returns `{stop}`,
// called when the address leaves it; moves inside a view (paging, search)
// rewrite the address with replaceState and do not re-render it.

import { getJson } from "./api.js";
import { overview } from "./overview.js";
import { stream } from "./stream.js";
import { streams } from "./streams.js";

const HEALTH_MS = 5000;
const view = document.getElementById("view");
let current = { key: null, view: null };

/** `#/stream/NAME?from=5` → `{route: "stream", name: "NAME", params}`. */
function parse(hash) {
  const [path, query = ""] = hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(query);
  const m = path.match(/^\/stream\/(.+)$/);
  if (m) return { route: "stream", name: decodeURIComponent(m[1]), params };
  if (path === "/streams") return { route: "streams", name: "", params };
  return { route: "overview", name: "", params };
}

function route() {
  const at = parse(location.hash);
  const key = `${at.route}/${at.name}`;
  if (key === current.key) return;
  current.view?.stop();
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.nav === at.route || (at.route === "stream" && a.dataset.nav === "streams"));
  }
  const render = { overview: () => overview(view), streams: () => streams(view, at.params), stream: () => stream(view, at.name, at.params) };
  document.title = at.route === "stream" ? `${at.name} · fencelog` : `${at.route} · fencelog`;
  current = { key, view: render[at.route]() };
}

async function health() {
  const badge = document.getElementById("health");
  try {
    await getJson("/healthz");
    badge.textContent = "accepting writes";
    badge.dataset.state = "ok";
  } catch (e) {
    badge.textContent = e.status ? `not accepting writes: ${e.message}` : "server unreachable";
    badge.dataset.state = "down";
  }
}

window.addEventListener("hashchange", route);
route();
health();
setInterval(health, HEALTH_MS);
