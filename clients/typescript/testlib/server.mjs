// The real fencelog binary for the tests: started on a free loopback port in
// a temporary directory, ready when it prints `listening on ADDR`, stopped by
// its own PID. Restarts reuse the port, so clients and live tails pointed at
// `url` reach the restarted server.

import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync } from "node:fs";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const clientDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const START_DEADLINE_MS = 30_000;

export function fencelogBin() {
  const env = process.env.FENCELOG_BIN;
  return env ? resolve(env) : resolve(clientDir, "../../target/debug/fencelog");
}

/** Fails the run, saying why, when the binary is missing: never a silent skip. */
export function requireBinary() {
  const bin = fencelogBin();
  if (!existsSync(bin)) {
    throw new Error(
      `fencelog binary not found at ${bin}: these tests run against the real server. ` +
        "Build it (`cargo build` at the workspace root) or point FENCELOG_BIN at one.",
    );
  }
  return bin;
}

export function tempDir(name) {
  return mkdtempSync(join(tmpdir(), `fencelog-ts-${name}-`));
}

export async function freePort() {
  const srv = createServer();
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

export class FencelogServer {
  /** `wrap` runs the binary through `bash -c` with a prefix (e.g. limits). */
  constructor(dataDir, { args = [], wrap = null } = {}) {
    this.bin = requireBinary();
    this.dataDir = dataDir;
    this.args = args;
    this.wrap = wrap;
    this.log = `${dataDir}.log`;
    this.port = 0;
    this.proc = null;
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  get pid() {
    return this.proc.pid;
  }

  async start() {
    const argv = ["serve", "--listen", `127.0.0.1:${this.port}`, "--data-dir", this.dataDir, ...this.args];
    const stderr = openSync(this.log, "a");
    // With a wrapper, bash `exec`s the binary, so the PID is still the server's.
    const [cmd, cmdArgs] = this.wrap
      ? ["bash", ["-c", `${this.wrap}; exec "$0" "$@"`, this.bin, ...argv]]
      : [this.bin, argv];
    this.proc = spawn(cmd, cmdArgs, { stdio: ["ignore", "pipe", stderr] });
    closeSync(stderr);
    const exited = new Promise((r) => this.proc.once("exit", (code, sig) => r({ code, sig })));
    this.exited = exited;
    const line = await new Promise((resolveLine, reject) => {
      let buf = "";
      const timer = setTimeout(() => reject(new Error(`no 'listening on' within ${START_DEADLINE_MS} ms; log:\n${this.logText()}`)), START_DEADLINE_MS);
      this.proc.stdout.on("data", (d) => {
        buf += d.toString();
        const m = buf.match(/^listening on (\S+)$/m);
        if (m) {
          clearTimeout(timer);
          resolveLine(m[1]);
        }
      });
      exited.then(({ code, sig }) => {
        clearTimeout(timer);
        reject(new Error(`fencelog exited (${code ?? sig}) before listening; log:\n${this.logText()}`));
      });
    });
    const port = Number(line.split(":").pop());
    if (this.port !== 0 && port !== this.port) throw new Error(`restarted on ${port}, not ${this.port}`);
    this.port = port;
    return this;
  }

  /** SIGKILL by PID: no shutdown path runs, as in a crash. */
  async kill9() {
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) {
      process.kill(this.proc.pid, "SIGKILL");
      await this.exited;
    }
  }

  /** SIGTERM by PID: the graceful path. Resolves to the exit code. */
  async stop() {
    if (this.proc.exitCode === null && this.proc.signalCode === null) process.kill(this.proc.pid, "SIGTERM");
    return (await this.exited).code;
  }

  logText() {
    try {
      return readFileSync(this.log, "utf8");
    } catch {
      return "(no log)";
    }
  }
}

/** Servers started by one test file, all killed at its end. */
export class Servers {
  constructor(name) {
    this.dir = tempDir(name);
    this.started = [];
    this.n = 0;
  }

  async start(options) {
    const s = new FencelogServer(join(this.dir, `data${this.n++}`), options);
    this.started.push(s);
    return s.start();
  }

  async cleanup() {
    for (const s of this.started) await s.kill9();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export function mount(args) {
  return execFileSync("mount", args, { stdio: ["ignore", "pipe", "pipe"] });
}

export function umount(path) {
  execFileSync("umount", [path]);
}

let names = 0;
/** A stream name no other test in this process uses. */
export function streamName(prefix) {
  return `${prefix.replace(/[^A-Za-z0-9._:-]/g, "-")}.${process.pid}.${names++}`;
}

export const text = (u8) => new TextDecoder().decode(u8);
export const bytes = (s) => new TextEncoder().encode(s);

/**
 * A TCP proxy to a fencelog server that, on the first connection after
 * `arm()` (armed from the start), forwards the request but destroys both
 * sides as soon as the server's answer starts arriving: the server did
 * answer, so the write was decided, and the client never hears it. Other
 * connections pass through. `dropped` counts the answers it dropped.
 */
export class AnswerDroppingProxy {
  constructor(upstreamPort) {
    this.upstreamPort = upstreamPort;
    this.armed = true;
    this.dropped = 0;
    this.sockets = new Set();
    this.server = createServer((client) => this.#accept(client));
  }

  async start() {
    await new Promise((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${this.server.address().port}`;
    return this;
  }

  arm() {
    this.armed = true;
  }

  #accept(client) {
    const upstream = connect(this.upstreamPort, "127.0.0.1");
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.on("close", () => this.sockets.delete(s));
      s.on("error", () => {});
    }
    const drop = this.armed;
    this.armed = false;
    client.pipe(upstream);
    if (drop) {
      upstream.once("data", () => {
        // The answer's first bytes: decided; dropped unread.
        this.dropped++;
        client.destroy();
        upstream.destroy();
      });
    } else {
      upstream.pipe(client);
    }
  }

  async close() {
    for (const s of this.sockets) s.destroy();
    await new Promise((r) => this.server.close(r));
  }
}

/** The error `fn` rejects with, checked to be an instance of `cls`. */
export async function caught(fn, cls) {
  try {
    await fn();
  } catch (e) {
    assert.ok(e instanceof cls, `expected ${cls.name}, got ${e?.name}: ${e?.message}`);
    return e;
  }
  assert.fail(`expected ${cls.name}, nothing was thrown`);
}
