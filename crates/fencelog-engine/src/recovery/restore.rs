//! Loading the checkpoint the MANIFEST names: every stream's state as of
//! its capture, which the scan then continues from.

use super::corrupt;
use super::scan::{Building, Scan};
use super::state::Core;
use crate::codec::checkpoint::CheckpointDecoder;
use crate::codec::manifest::Manifest;
use crate::error::OpenError;
use crate::files::checkpoint_name;
use crate::storage::Storage;

/// What a loaded checkpoint said besides the streams.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Loaded {
    pub generation: u64,
    /// Bytes of the file.
    pub bytes: u64,
    /// The writer's next group id when the capture ended: the log must
    /// reach at least the group before it.
    pub next_group_hint: u64,
}

/// Loads the checkpoint `m` names into `scan` (nothing without one).
pub(super) fn load(
    storage: &dyn Storage,
    m: Option<&Manifest>,
    scan: &mut Scan,
) -> Result<Loaded, OpenError> {
    let Some(m) = m.filter(|m| m.checkpoint_generation != 0) else {
        return Ok(Loaded::default());
    };
    let name = checkpoint_name(m.checkpoint_generation);
    let (_, view) = super::open_view(storage, &name)?;
    let len = view.len() as u64;
    let bad = |(at, e): (u64, crate::codec::DecodeError)| corrupt(&name, at, e.to_string());
    let mut d = CheckpointDecoder::new(&view).map_err(bad)?;
    let h = d.header;
    if h.generation != m.checkpoint_generation || h.covered_group_id != m.checkpoint_covered_group {
        return Err(corrupt(
            &name,
            16,
            format!(
                "checkpoint is generation {} covering group {}, the MANIFEST names generation {} covering {}",
                h.generation, h.covered_group_id, m.checkpoint_generation, m.checkpoint_covered_group
            ),
        ));
    }
    while let Some((at, e)) = d.next_entry().map_err(bad)? {
        if e.as_of_group >= h.next_group_id {
            return Err(corrupt(
                &name,
                at,
                format!(
                    "stream {} captured as of a group the writer had not reached",
                    e.name
                ),
            ));
        }
        let b = Building {
            core: Core::from_entry(&e),
            as_of_group: e.as_of_group,
            found: Vec::new(),
        };
        scan.streams.insert(e.name.into_boxed_str(), b);
    }
    scan.applied = d.applied.clone();
    Ok(Loaded {
        generation: h.generation,
        bytes: len,
        next_group_hint: h.next_group_id,
    })
}
