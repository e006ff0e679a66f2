// An incremental text/event-stream parser: text in, split anywhere, whole
// events out. Pure, so the unit tests run it in Node. Lines end with LF,
// CRLF or CR; a blank line ends an event; `:` lines are comments.

export class SseParser {
  constructor() {
    this.buffer = "";
    this.skipLf = false;
    this.reset();
  }

  reset() {
    this.event = "";
    this.id = null;
    this.data = [];
  }

  /** Feeds a chunk; returns the events it completed, `{event, id, data}`. */
  push(chunk) {
    const events = [];
    let text = this.buffer + chunk;
    if (this.skipLf && text.startsWith("\n")) text = text.slice(1);
    this.skipLf = false;
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (c !== "\n" && c !== "\r") continue;
      this.line(text.slice(start, i), events);
      if (c === "\r") {
        if (i + 1 === text.length) this.skipLf = true;
        else if (text[i + 1] === "\n") i++;
      }
      start = i + 1;
    }
    this.buffer = text.slice(start);
    return events;
  }

  line(line, events) {
    if (line === "") {
      if (this.data.length > 0 || this.event !== "") {
        events.push({ event: this.event || "message", id: this.id, data: this.data.join("\n") });
      }
      this.reset();
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.event = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id") this.id = value;
  }
}
