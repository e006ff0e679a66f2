//! Where `read` and `tail` start: `--from N` (or `--from end` for a
//! tail), `--last N`, or `--since DURATION`; at most one of them.

use super::common;
use fencelog_api::ReadStart;
use std::time::Duration;

/// `--from`: a seq, or `end` (the tail) where the command allows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    Seq(u64),
    End,
}

pub fn parse_from(raw: &str) -> Result<From, String> {
    if raw == "end" {
        return Ok(From::End);
    }
    raw.parse()
        .map(From::Seq)
        .map_err(|_| format!("--from takes a seq (a non-negative integer) or `end`, got {raw:?}"))
}

#[derive(Debug, Clone, clap::Args)]
#[group(multiple = false)]
pub struct StartArgs {
    /// First seq to print, or `end` to start at the tail.
    #[arg(long, value_name = "SEQ|end", value_parser = parse_from)]
    pub from: Option<From>,
    /// Start N records before the tail.
    #[arg(long, value_name = "N")]
    pub last: Option<u64>,
    /// Start at the first record written at most this long ago (90s, 10m,
    /// 2h, 7d, 500ms).
    #[arg(long, value_name = "DURATION", value_parser = common::parse_duration)]
    pub since: Option<Duration>,
}

impl StartArgs {
    /// The start the server is asked for; seq 0 when none is given.
    pub fn start(&self) -> ReadStart {
        if let Some(n) = self.last {
            return ReadStart::TailOffset(n);
        }
        if let Some(d) = self.since {
            return ReadStart::Timestamp(common::since_ms(d));
        }
        match self.from {
            None => ReadStart::Seq(0),
            Some(From::Seq(s)) => ReadStart::Seq(s),
            Some(From::End) => ReadStart::TailOffset(0),
        }
    }
}
