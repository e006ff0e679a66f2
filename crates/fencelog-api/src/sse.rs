//! The live tail's Server-Sent Events: the event names and their data, and
//! the one `text/event-stream` parser the client, the load generator and
//! the tests use.
//!
//! Events:
//! - `records`: `id` is the next seq to read, `data` a JSON array of
//!   [`crate::RecordJson`].
//! - `caught_up`: the consumer has read everything durable; same `id`,
//!   `data` is [`CaughtUp`].
//! - `ping`: the tail has been idle for the ping interval; `data` is `{}`.
//! - `error`: a read failed; `data` is the [`crate::ErrorBody`], then the
//!   stream ends.
//! - `sealed`: the stream is sealed and everything in it was sent; same
//!   `id`, `data` is [`Sealed`], then the stream ends.

use serde::{Deserialize, Serialize};

pub const RECORDS: &str = "records";
pub const CAUGHT_UP: &str = "caught_up";
pub const PING: &str = "ping";
pub const ERROR: &str = "error";
pub const SEALED: &str = "sealed";
/// The type of an event that names none.
pub const MESSAGE: &str = "message";

/// The data of a `ping`.
pub const PING_DATA: &str = "{}";

/// The data of a `caught_up`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaughtUp {
    pub next_seq: u64,
}

/// The data of a `sealed`: the stream ends at `next_seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    pub next_seq: u64,
}

/// One event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// [`MESSAGE`] when the event named no type.
    pub event: String,
    /// This event's own `id` field (not carried over from earlier events:
    /// fencelog puts the resume point on every event that has one).
    pub id: Option<String>,
    /// The `data` lines, joined with `\n`.
    pub data: String,
}

/// An incremental `text/event-stream` parser: bytes in, as they arrive and
/// split anywhere, complete events out. Pure: no I/O, no clock.
///
/// Lines end with LF, CRLF or a lone CR; a blank line ends an event; lines
/// starting with `:` are comments; `event`, `id` and `data` are read and
/// other fields (`retry`) ignored; one space after the colon is dropped.
/// An event is dispatched when it has data or a type, so a block of
/// comments (a keep-alive) yields nothing. Invalid UTF-8 becomes U+FFFD.
#[derive(Debug, Default)]
pub struct SseParser {
    /// The line so far, as bytes: a chunk may end inside a UTF-8 sequence.
    line: Vec<u8>,
    /// The last byte was a CR, so an LF right after it ends no line.
    after_cr: bool,
    event: String,
    id: Option<String>,
    data: String,
    has_data: bool,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds `chunk` and returns the events it completed, in order.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        let mut rest = chunk;
        while let Some((&first, tail)) = rest.split_first() {
            if self.after_cr && first == b'\n' {
                self.after_cr = false;
                rest = tail;
                continue;
            }
            self.after_cr = false;
            let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') else {
                self.line.extend_from_slice(rest);
                break;
            };
            self.line.extend_from_slice(&rest[..end]);
            self.after_cr = rest[end] == b'\r';
            rest = &rest[end + 1..];
            let line = std::mem::take(&mut self.line);
            out.extend(self.end_line(&line));
            // Keep the allocation for the next line.
            self.line = line;
            self.line.clear();
        }
        out
    }

    fn end_line(&mut self, line: &[u8]) -> Option<SseEvent> {
        if line.is_empty() {
            return self.end_event();
        }
        if line[0] == b':' {
            return None;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        let value = String::from_utf8_lossy(value);
        match field {
            b"event" => self.event = value.into_owned(),
            b"id" => self.id = Some(value.into_owned()),
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&value);
                self.has_data = true;
            }
            _ => {}
        }
        None
    }

    fn end_event(&mut self) -> Option<SseEvent> {
        let dispatch = self.has_data || !self.event.is_empty();
        self.has_data = false;
        let mut event = SseEvent {
            event: std::mem::take(&mut self.event),
            id: self.id.take(),
            data: std::mem::take(&mut self.data),
        };
        if !dispatch {
            return None;
        }
        if event.event.is_empty() {
            event.event = MESSAGE.to_string();
        }
        Some(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: &str, id: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            id: id.map(Into::into),
            data: data.into(),
        }
    }

    /// A stream with every line ending, comments, multi-line data, a
    /// field without a colon or a space, an unknown field, a keep-alive
    /// block and a multi-byte character.
    const STREAM: &[u8] = b": hello\n\nevent: records\nid: 3\ndata: [1,\ndata: 2]\n\n\
        event: ping\r\ndata: {}\r\n\r\nretry: 10\ndata:x\rdata\r\rid: 7\nevent: caught_up\n\
        data: {\"next_seq\":7}\n\ndata: \xc3\xa9t\xc3\xa9\n\n: tail with no end";

    fn expected() -> Vec<SseEvent> {
        vec![
            ev(RECORDS, Some("3"), "[1,\n2]"),
            ev(PING, None, PING_DATA),
            ev(MESSAGE, None, "x\n"),
            ev(CAUGHT_UP, Some("7"), r#"{"next_seq":7}"#),
            ev(MESSAGE, None, "été"),
        ]
    }

    #[test]
    fn parses_the_stream_whole() {
        assert_eq!(SseParser::new().push(STREAM), expected());
    }

    #[test]
    fn parses_the_stream_split_at_every_byte() {
        for at in 0..=STREAM.len() {
            let mut p = SseParser::new();
            let mut got = p.push(&STREAM[..at]);
            got.extend(p.push(&STREAM[at..]));
            assert_eq!(got, expected(), "split at {at}");
        }
        let mut p = SseParser::new();
        let got: Vec<SseEvent> = STREAM.iter().flat_map(|b| p.push(&[*b])).collect();
        assert_eq!(got, expected(), "one byte at a time");
    }

    #[test]
    fn an_event_without_its_blank_line_is_not_dispatched() {
        let mut p = SseParser::new();
        assert_eq!(p.push(b"event: records\ndata: []\n"), vec![]);
        assert_eq!(p.push(b"\n"), vec![ev(RECORDS, None, "[]")]);
        // A CR at the very end of a chunk, then its LF in the next.
        assert_eq!(p.push(b"data: a\r\n\r"), vec![ev(MESSAGE, None, "a")]);
        assert_eq!(p.push(b"\ndata: b\n\n"), vec![ev(MESSAGE, None, "b")]);
    }

    /// The Rust client's parser test, from before its parser moved here.
    #[test]
    fn handles_split_chunks_comments_and_multiline_data() {
        let mut p = SseParser::new();
        let text =
            b": hello\nevent: records\nid: 3\ndata: [1,\ndata: 2]\n\nevent: ping\ndata: \r\n\r\n";
        let mut events = Vec::new();
        for chunk in text.chunks(5) {
            events.extend(p.push(chunk));
        }
        assert_eq!(
            events,
            vec![ev(RECORDS, Some("3"), "[1,\n2]"), ev(PING, None, "")]
        );
    }

    #[test]
    fn caught_up_data_round_trips() {
        let text = serde_json::to_string(&CaughtUp { next_seq: 5 }).unwrap();
        assert_eq!(text, r#"{"next_seq":5}"#);
        assert_eq!(
            serde_json::from_str::<CaughtUp>(&text).unwrap(),
            CaughtUp { next_seq: 5 }
        );
    }
}
