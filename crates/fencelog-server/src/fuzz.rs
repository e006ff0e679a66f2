//! Fuzz target bodies of the HTTP decoders, shared by the cargo-fuzz
//! workspace in `fuzz/` and the corpus replay test. Each takes arbitrary
//! bytes and panics only when it finds a bug.

/// The HTTP layer's parsing of stream names and JSON append bodies never
/// panics, and whatever it accepts satisfies the engine's preconditions.
pub fn http_append_body(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        if fencelog_engine::validate_stream_name(text).is_ok() {
            assert!(!text.is_empty() && text.len() <= 255 && text != "." && text != "..");
            assert!(text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b)));
        }
    }
    let reference = crate::json_append::parse_value(data);
    if let Ok(append) = &reference {
        assert!(append.token >= 1, "token 0 accepted");
        assert!(!append.records.is_empty(), "empty batch accepted");
    }
    // The fast path may decline anything, but what it accepts must be
    // accepted by the reference parser with the very same result, and the
    // combined parser must answer exactly as the reference does (same
    // append, or the same error).
    let body = bytes::Bytes::copy_from_slice(data);
    let combined = crate::json_append::parse(&body);
    match (&reference, &combined) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "fast path disagrees with the reference parser"),
        (Err(a), Err(b)) => assert_eq!(a, b, "the combined parser explains differently"),
        _ => panic!("fast path accepted what the reference refuses, or the reverse: {reference:?} vs {combined:?}"),
    }
}
