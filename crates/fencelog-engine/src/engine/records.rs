//! Appends of records that may carry headers ([`Engine::append_records`]):
//! the records split into bodies and header lists, then the same
//! [`WriteOp`] as a plain append ([`super::writes`]).

use super::Engine;
use crate::error::WriteError;
use crate::op::{AppendOptions, Applied, WriteOp};
use fencelog_types::{Ack, RecordIn};

impl Engine {
    /// Appends records that may carry headers, atomically, like
    /// [`Engine::append`] (which is this without headers, and what this
    /// does when no record has any, so such a batch is byte for byte a
    /// plain append). Every record's headers are checked against the
    /// limits, and their bytes count against the batch byte limit, before
    /// anything reaches the writer.
    pub async fn append_records(
        &self,
        stream: &str,
        fencing_token: u64,
        records: Vec<RecordIn>,
        match_seq_num: Option<u64>,
    ) -> Result<Ack, WriteError> {
        let options = AppendOptions {
            match_seq_num,
            ..Default::default()
        };
        self.append_records_with(stream, fencing_token, records, options)
            .await
    }

    /// [`Engine::append_records`] with an idempotent producer and a
    /// deadline, as [`Engine::append_with`].
    pub async fn append_records_with(
        &self,
        stream: &str,
        fencing_token: u64,
        records: Vec<RecordIn>,
        options: AppendOptions,
    ) -> Result<Ack, WriteError> {
        let (records, headers) = records.into_iter().map(|r| (r.body, r.headers)).unzip();
        let op = WriteOp::Append {
            stream: stream.into(),
            token: fencing_token,
            records,
            headers,
            options,
        };
        self.written(op).await.map(Applied::into_ack)
    }
}
