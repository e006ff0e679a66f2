//! Stream-level answers and requests: a stream's state (`GET
//! /v1/streams/{stream}`, and the answer to a fence, trim, seal, delete or
//! config change), a page of the stream list (`GET /v1/streams`), and the
//! requests that change a stream without appending.

use fencelog_types::{Retention, StreamConfig, StreamState};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

/// Streams per listing page when `limit` is not given.
pub const LIST_LIMIT_DEFAULT: u64 = 100;
/// Most streams one listing page returns, whatever `limit` asks for.
pub const LIST_LIMIT_CAP: u64 = 1000;

/// What a retention field of a config request says about the stream's
/// setting: `"unlimited"` keeps records forever, a number of seconds or
/// bytes limits them, and `null` (or leaving the field out) goes back to
/// the server's default.
pub const RETENTION_UNLIMITED: &str = "unlimited";

/// A stream's durable state (the `StreamState` schema).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamInfo {
    pub stream: String,
    /// The first readable seq: records below it were trimmed.
    pub first_seq: u64,
    pub next_seq: u64,
    pub highest_token: u64,
    /// Timestamp of the last record; 0 when the stream has none.
    pub last_timestamp_ms: u64,
    /// No more appends, fences or trims are accepted.
    #[serde(default)]
    pub sealed: bool,
    /// Only in the answer to a delete: the stream is a tombstone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
    /// Retention by age in force, in seconds; `null` is unlimited.
    #[serde(default)]
    pub retention_age_s: Option<u64>,
    /// Retention by size in force, in bytes; `null` is unlimited.
    #[serde(default)]
    pub retention_bytes: Option<u64>,
    /// Retention never trims past a fenced cursor.
    #[serde(default)]
    pub retention_respect_cursors: bool,
    /// Bytes on disk of the stream's readable records.
    #[serde(default)]
    pub bytes: u64,
}

impl From<StreamState> for StreamInfo {
    fn from(s: StreamState) -> Self {
        StreamInfo {
            stream: s.stream,
            first_seq: s.first_seq,
            next_seq: s.next_seq,
            highest_token: s.highest_token,
            last_timestamp_ms: s.last_timestamp_ms,
            sealed: s.sealed,
            deleted: s.deleted,
            retention_age_s: s.retention_age_s,
            retention_bytes: s.retention_bytes,
            retention_respect_cursors: s.retention_respect_cursors,
            bytes: s.bytes,
        }
    }
}

/// One page of streams, in name order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamList {
    pub streams: Vec<StreamInfo>,
    /// Pass as `start_after` to get the next page; `null` on the last one.
    #[serde(default)]
    pub next_start_after: Option<String>,
}

/// `POST /v1/streams/{stream}/fence`, `/seal`, and `DELETE
/// /v1/streams/{stream}`. Only serialised, like [`crate::AppendRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FenceRequest {
    pub fencing_token: u64,
}

/// `POST /v1/streams/{stream}/trim`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TrimRequest {
    pub fencing_token: u64,
    /// Records below it become unreadable.
    pub trim_seq: u64,
}

/// `PUT /v1/streams/{stream}/config`: the stream's retention settings, all
/// replaced at once (a field left out goes back to the server's default).
/// Only serialised; the server parses it and explains every bad field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigRequest {
    /// Fences the change like a trim; without it the change is an
    /// operator's (accepted on a sealed stream too).
    pub fencing_token: Option<u64>,
    pub config: StreamConfig,
}

impl Serialize for ConfigRequest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        if let Some(t) = self.fencing_token {
            map.serialize_entry("fencing_token", &t)?;
        }
        for (key, r) in [
            ("retention_age_s", self.config.retention_age_s),
            ("retention_bytes", self.config.retention_bytes),
        ] {
            match r {
                Retention::Default => {}
                Retention::Unlimited => map.serialize_entry(key, RETENTION_UNLIMITED)?,
                Retention::Limit(v) => map.serialize_entry(key, &v)?,
            }
        }
        if self.config.respect_cursors {
            map.serialize_entry("retention_respect_cursors", &true)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_requests_serialise_every_setting_and_only_what_is_set() {
        let req = ConfigRequest {
            fencing_token: Some(4),
            config: StreamConfig {
                retention_age_s: Retention::Limit(604_800),
                retention_bytes: Retention::Unlimited,
                respect_cursors: true,
            },
        };
        assert_eq!(
            serde_json::to_string(&req).unwrap(),
            r#"{"fencing_token":4,"retention_age_s":604800,"retention_bytes":"unlimited","retention_respect_cursors":true}"#
        );
        let plain = ConfigRequest {
            fencing_token: None,
            config: StreamConfig::default(),
        };
        assert_eq!(serde_json::to_string(&plain).unwrap(), "{}");
    }

    #[test]
    fn a_state_from_an_older_server_still_decodes() {
        let old =
            r#"{"stream":"s","first_seq":0,"next_seq":3,"highest_token":2,"last_timestamp_ms":9}"#;
        let s: StreamInfo = serde_json::from_str(old).unwrap();
        assert!(!s.sealed && !s.deleted && s.bytes == 0 && s.retention_age_s.is_none());
    }
}
