//! A bounds-checked little-endian reader over a byte slice: every take
//! checks the length first, so a corrupt length field can never make a
//! decoder read past its input or panic.

use super::DecodeError;

/// Reads fixed-width little-endian integers and byte runs from the front
/// of a slice. [`BytesIn::pos`] is where the next take starts, for error
/// offsets.
#[derive(Debug, Clone)]
pub struct BytesIn<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> BytesIn<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        BytesIn { buf, pos: 0 }
    }

    /// Bytes taken so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return Err(DecodeError::Truncated {
                needed: self.pos + n,
                available: self.buf.len(),
            });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("take(2) gives 2 bytes"),
        ))
    }

    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("take(4) gives 4 bytes"),
        ))
    }

    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("take(8) gives 8 bytes"),
        ))
    }

    /// Fails unless every byte was taken: the formats have no slack.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if self.remaining() != 0 {
            return Err(DecodeError::BadRecordLayout);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_little_endian_and_refuses_to_overrun() {
        let b = [1u8, 2, 0, 3, 0, 0, 0, 9];
        let mut r = BytesIn::new(&b);
        assert_eq!(r.u8(), Ok(1));
        assert_eq!(r.u16(), Ok(2));
        assert_eq!(r.u32(), Ok(3));
        assert_eq!(r.pos(), 7);
        assert_eq!(
            r.u64(),
            Err(DecodeError::Truncated {
                needed: 15,
                available: 8
            })
        );
        assert_eq!(r.pos(), 7, "a failed take takes nothing");
        assert_eq!(r.finish(), Err(DecodeError::BadRecordLayout));
        assert_eq!(r.u8(), Ok(9));
        assert_eq!(r.finish(), Ok(()));
    }
}
