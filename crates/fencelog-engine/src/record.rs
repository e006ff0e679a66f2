//! The limits on a record's headers and their check, run before anything
//! reaches the writer. The records themselves (`Header`, `RecordIn`,
//! `Record`) are plain values of `fencelog_types`.
//!
//! Names are 1..=255 bytes, values any bytes, within the per-record
//! limits below. On disk headers are part of the records payload of a
//! frame with the HEADERS flag (see the format tables in docs/design.md):
//! per record `u16 header_count`, per header `u16 name_len`, name,
//! `u32 value_len`, value, then `u32 body_len`, body.

use fencelog_types::Header;
use std::fmt;

/// The limits are the format's (`codec::payload`), so a record the engine
/// accepts is always one the decoder believes.
pub use crate::codec::{
    HEADERS_PER_RECORD_MAX, HEADER_BYTES_PER_RECORD_MAX, HEADER_NAME_BYTES_MAX,
};

/// Why a record's headers were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// More than [`HEADERS_PER_RECORD_MAX`] headers.
    TooMany {
        /// How many the record had.
        count: usize,
    },
    /// Names and values together over [`HEADER_BYTES_PER_RECORD_MAX`].
    TooManyBytes {
        /// How many bytes the record's headers had.
        bytes: usize,
    },
    /// A header with an empty name.
    EmptyName {
        /// Which header, from 0.
        index: usize,
    },
    /// A name over [`HEADER_NAME_BYTES_MAX`] bytes.
    NameTooLong {
        /// Which header, from 0.
        index: usize,
        /// Its length in bytes.
        len: usize,
    },
}

impl HeaderError {
    /// Whether this is a size limit (an HTTP 413) rather than a malformed
    /// header (a 400).
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            HeaderError::TooMany { .. } | HeaderError::TooManyBytes { .. }
        )
    }
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            HeaderError::TooMany { count } => write!(
                f,
                "{count} headers, the limit is {HEADERS_PER_RECORD_MAX} per record"
            ),
            HeaderError::TooManyBytes { bytes } => write!(
                f,
                "{bytes} bytes of header names and values, the limit is \
                 {HEADER_BYTES_PER_RECORD_MAX} per record"
            ),
            HeaderError::EmptyName { index } => write!(f, "header {index} has an empty name"),
            HeaderError::NameTooLong { index, len } => write!(
                f,
                "header {index} has a {len}-byte name, the limit is {HEADER_NAME_BYTES_MAX}"
            ),
        }
    }
}

impl std::error::Error for HeaderError {}

/// Checks one record's headers against the limits. Pure, so the HTTP layer
/// refuses a bad header before the request reaches the writer, with the
/// same rule the engine applies.
pub fn validate_headers(headers: &[Header]) -> Result<(), HeaderError> {
    if headers.len() > HEADERS_PER_RECORD_MAX {
        return Err(HeaderError::TooMany {
            count: headers.len(),
        });
    }
    let mut bytes = 0usize;
    for (index, h) in headers.iter().enumerate() {
        if h.name.is_empty() {
            return Err(HeaderError::EmptyName { index });
        }
        if h.name.len() > HEADER_NAME_BYTES_MAX {
            return Err(HeaderError::NameTooLong {
                index,
                len: h.name.len(),
            });
        }
        bytes += h.name.len() + h.value.len();
    }
    if bytes > HEADER_BYTES_PER_RECORD_MAX {
        return Err(HeaderError::TooManyBytes { bytes });
    }
    Ok(())
}

/// Bytes of header names and values in `headers`: what the batch byte
/// limit and the read byte budgets count besides the bodies.
pub(crate) fn header_bytes(headers: &[Header]) -> usize {
    headers.iter().map(|h| h.name.len() + h.value.len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_inclusive_and_checked_in_order() {
        let h = |n: usize, v: usize| Header::new(vec![b'n'; n], vec![b'v'; v]);
        assert_eq!(validate_headers(&[]), Ok(()));
        let max: Vec<Header> = (0..HEADERS_PER_RECORD_MAX).map(|_| h(1, 0)).collect();
        assert_eq!(validate_headers(&max), Ok(()));
        let over: Vec<Header> = (0..=HEADERS_PER_RECORD_MAX).map(|_| h(1, 0)).collect();
        assert_eq!(
            validate_headers(&over),
            Err(HeaderError::TooMany { count: 65 })
        );
        assert_eq!(
            validate_headers(&[h(255, HEADER_BYTES_PER_RECORD_MAX - 255)]),
            Ok(())
        );
        let e = validate_headers(&[h(255, HEADER_BYTES_PER_RECORD_MAX - 254)]).unwrap_err();
        assert_eq!(e, HeaderError::TooManyBytes { bytes: 8193 });
        assert!(e.is_limit());
        assert_eq!(
            validate_headers(&[h(1, 0), h(0, 1)]),
            Err(HeaderError::EmptyName { index: 1 })
        );
        let e = validate_headers(&[h(256, 0)]).unwrap_err();
        assert_eq!(e, HeaderError::NameTooLong { index: 0, len: 256 });
        assert!(!e.is_limit());
        assert_eq!(
            e.to_string(),
            "header 0 has a 256-byte name, the limit is 255"
        );
    }
}
