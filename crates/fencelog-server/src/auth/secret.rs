//! Secrets: their SHA-256 (what the config file stores), hex, a
//! comparison without an early exit, and new random ones.

use sha2::{Digest, Sha256};

/// The SHA-256 of a secret, as the config file stores it.
pub fn hash_secret(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
    out
}

pub(super) fn parse_hex32(text: &str) -> Option<[u8; 32]> {
    let text = text.as_bytes();
    if text.len() != 64 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok());
    let mut out = [0u8; 32];
    for (i, pair) in text.chunks(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

/// Equal without an early exit: the loop always runs over every byte and
/// only ORs differences together, so how long it takes does not depend on
/// where the first difference is. (`black_box` keeps the optimiser from
/// turning the fold back into a short-circuiting compare.)
pub fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let mut diff = 0u8;
    for i in 0..32 {
        diff |= std::hint::black_box(a[i] ^ b[i]);
    }
    diff == 0
}

/// Bytes of randomness in a new secret: 256 bits, twice the 128 a bearer
/// secret needs against guessing.
pub const SECRET_BYTES: usize = 32;

/// A new secret from the operating system's random source, as 64 hex
/// digits prefixed `fl_` so it is recognisable in a leaked file.
pub fn generate_secret() -> Result<String, String> {
    let mut raw = [0u8; SECRET_BYTES];
    getrandom::fill(&mut raw).map_err(|e| format!("no randomness from the OS: {e}"))?;
    Ok(format!("fl_{}", to_hex(&raw)))
}
