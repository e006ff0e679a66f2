//! The checks a write gets before the writer, pure: names, token 0, record
//! headers, the batch limits and a batch's shape, in one order for every
//! front. [`check_write`] runs them for a [`WriteOp`], and calls back into
//! its caller for what needs the engine's state — its health and the
//! rejection fast path ([`crate::fence::check_durable`]) — at the point
//! the order puts them. A single node runs them before it queues a write
//! (`Engine::write`), a cluster node before it proposes one
//! (`Engine::check_write`), so both refuse the same input the same way.

use crate::config::Config;
use crate::error::WriteError;
use crate::name::validate_stream_name;
use crate::op::{BatchAction, BatchOp, WriteOp};
use crate::record::{header_bytes, validate_headers};
use bytes::Bytes;
use fencelog_types::{Header, StreamConfig};

/// Operations one multi-stream batch may carry.
pub const BATCH_OPS_MAX: usize = 64;

/// Every check of `op` before the writer, in order. `durable(stream,
/// token)` is called once the names and token 0 passed: the engine's
/// health, then the fast path with [`fast_path_token`] if it is `Some`.
pub(crate) fn check_write(
    op: &WriteOp,
    config: &Config,
    durable: impl FnOnce(&str, Option<u64>) -> Result<(), WriteError>,
) -> Result<(), WriteError> {
    let fast = fast_path_token(op);
    match op {
        WriteOp::Append {
            stream,
            token,
            records,
            headers,
            options,
        } => {
            if let Some(p) = &options.producer {
                validate_short_name("producer_id", &p.id)?;
                nonzero(*token)?;
            }
            named(stream, fast)?;
            durable(stream, fast)?;
            check_headers(headers)?;
            let header_bytes = headers.iter().map(|h| header_bytes(h)).sum();
            check_batch(config, records, header_bytes)
        }
        WriteOp::Fence { stream, .. }
        | WriteOp::Trim { stream, .. }
        | WriteOp::Seal { stream, .. }
        | WriteOp::Delete { stream, .. } => {
            named(stream, fast)?;
            durable(stream, fast)
        }
        WriteOp::Config { stream, config, .. } => {
            named(stream, fast)?;
            durable(stream, fast)?;
            validate_stream_config(config)
        }
        WriteOp::Cursor {
            stream,
            name,
            token,
            ..
        } => {
            validate_short_name("cursor name", name)?;
            nonzero(*token)?;
            named(stream, None)?;
            durable(stream, None)
        }
        WriteOp::Batch { ops, .. } => {
            check_batch_ops(config, ops)?;
            named(&ops[0].stream, None)?;
            durable(&ops[0].stream, None)
        }
        WriteOp::Retain { stream, .. } => {
            named(stream, None)?;
            durable(stream, None)
        }
    }
}

/// The token the rejection fast path holds against the stream's durable
/// highest, if `op` is fenced by the stream's token and decided by it
/// first. `None` for an idempotent producer's append (its duplicate is
/// answered before the token), an operator's config change, a cursor (its
/// own token fences it), a batch (every op's outcome is answered) and a
/// retention trim (it carries the stream's own token).
pub(crate) fn fast_path_token(op: &WriteOp) -> Option<u64> {
    match op {
        WriteOp::Append { token, options, .. } => options.producer.is_none().then_some(*token),
        WriteOp::Fence { token, .. }
        | WriteOp::Trim { token, .. }
        | WriteOp::Seal { token, .. }
        | WriteOp::Delete { token, .. } => Some(*token),
        WriteOp::Config { token, .. } => *token,
        WriteOp::Cursor { .. } | WriteOp::Batch { .. } | WriteOp::Retain { .. } => None,
    }
}

/// The stream's name, then token 0 when the write carries `token`.
fn named(stream: &str, token: Option<u64>) -> Result<(), WriteError> {
    validate_stream_name(stream).map_err(WriteError::InvalidStreamName)?;
    match token {
        Some(t) => nonzero(t),
        None => Ok(()),
    }
}

fn nonzero(token: u64) -> Result<(), WriteError> {
    if token == 0 {
        return Err(WriteError::ZeroToken);
    }
    Ok(())
}

/// Every record's headers against the limits, naming the record.
fn check_headers(headers: &[Vec<Header>]) -> Result<(), WriteError> {
    for (record, h) in headers.iter().enumerate() {
        validate_headers(h).map_err(|error| WriteError::BadHeaders { record, error })?;
    }
    Ok(())
}

/// A batch of records against `config`'s record and byte limits;
/// `header_bytes` are the names and values of its headers, which count
/// like body bytes.
pub(crate) fn check_batch(
    config: &Config,
    records: &[Bytes],
    header_bytes: usize,
) -> Result<(), WriteError> {
    if records.is_empty() {
        return Err(WriteError::EmptyBatch);
    }
    if records.len() > config.batch_records_max {
        return Err(WriteError::TooLarge {
            what: "records in the batch",
            limit: config.batch_records_max as u64,
            actual: records.len() as u64,
        });
    }
    let bytes: usize = records.iter().map(|r| r.len()).sum::<usize>() + header_bytes;
    if bytes > config.batch_bytes_max {
        return Err(WriteError::TooLarge {
            what: "bytes in the batch",
            limit: config.batch_bytes_max as u64,
            actual: bytes as u64,
        });
    }
    Ok(())
}

/// A multi-stream batch: 1..=[`BATCH_OPS_MAX`] ops, valid names, no token
/// 0, each append within `config`'s limits and all of them within its
/// batch bytes.
fn check_batch_ops(config: &Config, ops: &[BatchOp]) -> Result<(), WriteError> {
    if ops.is_empty() || ops.len() > BATCH_OPS_MAX {
        return Err(WriteError::BadInput(format!(
            "a batch has 1..={BATCH_OPS_MAX} operations, this one {}",
            ops.len()
        )));
    }
    let mut bytes = 0usize;
    for (i, op) in ops.iter().enumerate() {
        let at = |e: WriteError| WriteError::BadInput(format!("ops[{i}]: {e}"));
        validate_stream_name(&op.stream).map_err(|e| at(WriteError::InvalidStreamName(e)))?;
        if op.fencing_token == 0 {
            return Err(at(WriteError::ZeroToken));
        }
        if let BatchAction::Append { records, .. } = &op.action {
            check_batch(config, records, 0).map_err(|e| match e {
                e @ WriteError::TooLarge { .. } => e,
                e => at(e),
            })?;
            bytes += records.iter().map(|r| r.len()).sum::<usize>();
        }
    }
    if bytes > config.batch_bytes_max {
        return Err(WriteError::TooLarge {
            what: "bytes in the multi-stream batch",
            limit: config.batch_bytes_max as u64,
            actual: bytes as u64,
        });
    }
    Ok(())
}

/// The ranges a stream's retention settings must be in (also checked in a
/// shard engine's apply: the same on every node).
pub fn validate_stream_config(config: &StreamConfig) -> Result<(), WriteError> {
    let limit = crate::config::RETENTION_AGE_S_LIMIT;
    if let Some(age) = config.retention_age_s.effective(None) {
        if age == 0 || age > limit {
            return Err(WriteError::BadConfig(format!(
                "retention_age_s must be in 1..={limit}, got {age}"
            )));
        }
    }
    if config.retention_bytes.effective(None) == Some(0) {
        return Err(WriteError::BadConfig(
            "retention_bytes must be at least 1".into(),
        ));
    }
    Ok(())
}

/// Producer ids and cursor names: 1..=64 bytes of `[A-Za-z0-9._:-]`.
pub fn validate_short_name(what: &str, name: &str) -> Result<(), WriteError> {
    crate::codec::check_short_name(name.as_bytes(), crate::codec::PRODUCER_ID_BYTES_MAX)
        .map_err(|e| WriteError::BadInput(format!("{what} {name:?}: {e}")))
}
