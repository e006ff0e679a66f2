//! Stream names: validated once at the boundary, never turned into paths.
//!
//! Names are opaque keys inside one shared log, so the only reason for a
//! character whitelist is to keep names safe in URLs, logs and shells.

use std::fmt;

/// Longest stream name in bytes. Bounded so a frame header can carry the
/// length in one byte's worth of range and an attacker cannot make the
/// in-memory map hold huge keys.
pub const STREAM_NAME_BYTES_MAX: usize = 255;

/// Why a stream name was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameError {
    /// The empty string.
    Empty,
    /// More than 255 bytes.
    TooLong {
        /// The name's length in bytes.
        len: usize,
    },
    /// `.` and `..` are refused even though names never become paths, so a
    /// name can be pasted into a URL path segment without surprises.
    DotName,
    /// A byte outside `[A-Za-z0-9._:-]`.
    BadChar {
        /// Where the first such byte is.
        index: usize,
        /// The byte.
        byte: u8,
    },
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::Empty => write!(f, "stream name is empty"),
            NameError::TooLong { len } => write!(
                f,
                "stream name is {len} bytes, the limit is {STREAM_NAME_BYTES_MAX}"
            ),
            NameError::DotName => write!(f, "stream name must not be '.' or '..'"),
            &NameError::BadChar { index, byte } => {
                // Name the character as a person typed it when it is one.
                if byte.is_ascii_graphic() || byte == b' ' {
                    write!(f, "'{}' is not allowed in a stream name", byte as char)?;
                } else {
                    write!(f, "byte 0x{byte:02x} is not allowed in a stream name")?;
                }
                write!(f, " (at byte {index}; allowed are A-Z a-z 0-9 . _ : -)")
            }
        }
    }
}

impl std::error::Error for NameError {}

/// Checks a stream name: 1..=255 bytes of `[A-Za-z0-9._:-]`, not `.` or `..`.
pub fn validate_stream_name(name: &str) -> Result<(), NameError> {
    validate_stream_name_bytes(name.as_bytes())
}

/// Byte-level form of [`validate_stream_name`], used by the decoder so that
/// a name read from disk passes exactly the rule a name from a client does.
pub fn validate_stream_name_bytes(name: &[u8]) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > STREAM_NAME_BYTES_MAX {
        return Err(NameError::TooLong { len: name.len() });
    }
    if name == b"." || name == b".." {
        return Err(NameError::DotName);
    }
    for (index, &byte) in name.iter().enumerate() {
        let ok = byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b':' | b'-');
        if !ok {
            return Err(NameError::BadChar { index, byte });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_whole_alphabet() {
        assert_eq!(validate_stream_name("orders.eu-west:2_a"), Ok(()));
        assert_eq!(validate_stream_name("..."), Ok(()));
        assert_eq!(validate_stream_name(&"a".repeat(255)), Ok(()));
    }

    #[test]
    fn says_which_character_is_refused_as_a_person_typed_it() {
        let text = |name: &str| validate_stream_name(name).unwrap_err().to_string();
        assert_eq!(
            text("team/orders"),
            "'/' is not allowed in a stream name (at byte 4; allowed are A-Z a-z 0-9 . _ : -)"
        );
        assert_eq!(
            text("a b"),
            "' ' is not allowed in a stream name (at byte 1; allowed are A-Z a-z 0-9 . _ : -)"
        );
        assert_eq!(
            text("é"),
            "byte 0xc3 is not allowed in a stream name (at byte 0; allowed are A-Z a-z 0-9 . _ : -)"
        );
    }

    #[test]
    fn refuses_each_bad_case() {
        assert_eq!(validate_stream_name(""), Err(NameError::Empty));
        assert_eq!(
            validate_stream_name(&"a".repeat(256)),
            Err(NameError::TooLong { len: 256 })
        );
        assert_eq!(validate_stream_name("."), Err(NameError::DotName));
        assert_eq!(validate_stream_name(".."), Err(NameError::DotName));
        assert_eq!(
            validate_stream_name("a/b"),
            Err(NameError::BadChar {
                index: 1,
                byte: b'/'
            })
        );
        assert_eq!(
            validate_stream_name("é"),
            Err(NameError::BadChar {
                index: 0,
                byte: 0xc3
            })
        );
        assert_eq!(
            validate_stream_name("a b"),
            Err(NameError::BadChar {
                index: 1,
                byte: b' '
            })
        );
    }
}
