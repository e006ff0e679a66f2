//! Lengths and counts narrowed to the width of their field in a frame.
//!
//! Every length inside a frame is bounded before it is narrowed: a whole
//! frame by `FRAME_BYTES_MAX` (64 MiB), names by their `*_BYTES_MAX`,
//! counts by `FRAME_RECORDS_MAX` and `HEADERS_PER_RECORD_MAX` — asserted by
//! the encoders, checked by the decoder. These helpers carry that bound to
//! the field's width without adding work per record in release builds;
//! debug builds (the test suites) still check it.

/// A length or count bounded by a format limit below `u32::MAX` (the
/// largest is `FRAME_BYTES_MAX`, 64 MiB), as its `u32` field.
#[allow(
    clippy::cast_possible_truncation,
    reason = "every caller bounds `n` by a format limit of at most 64 MiB first"
)]
#[inline]
pub(crate) fn len_u32(n: usize) -> u32 {
    debug_assert!(u32::try_from(n).is_ok(), "{n} over a u32 field");
    n as u32
}

/// A name length or count bounded by a format limit of at most 255 (a
/// stream or header name's bytes, a record's 64 headers), as its `u16`
/// field.
#[allow(
    clippy::cast_possible_truncation,
    reason = "every caller bounds `n` by a format limit of at most 255 first"
)]
#[inline]
pub(crate) fn len_u16(n: usize) -> u16 {
    debug_assert!(u16::try_from(n).is_ok(), "{n} over a u16 field");
    n as u16
}

/// A short name's length, bounded by `PRODUCER_ID_BYTES_MAX` or
/// `CURSOR_NAME_BYTES_MAX` (64 bytes), as its `u8` field.
#[allow(
    clippy::cast_possible_truncation,
    reason = "every caller bounds `n` by a 64-byte name limit first"
)]
#[inline]
pub(crate) fn len_u8(n: usize) -> u8 {
    debug_assert!(u8::try_from(n).is_ok(), "{n} over a u8 field");
    n as u8
}
