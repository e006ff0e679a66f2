//! Compaction (the next commit).

use super::live::Live;
use super::{ReclaimReport, Writer};
use crate::error::WriteError;
use crate::shared::Shared;

pub(super) fn run(
    _shared: &Shared,
    _writer: &Writer<'_>,
    _live: &Live,
    _report: &mut ReclaimReport,
) -> Result<(), WriteError> {
    Ok(())
}
