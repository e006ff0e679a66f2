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
    let reference = crate::decode::json_append::parse_value(data);
    if let Ok(append) = &reference {
        assert!(append.token >= 1, "token 0 accepted");
        assert!(!append.records.is_empty(), "empty batch accepted");
    }
    // The fast path may decline anything, but what it accepts must be
    // accepted by the reference parser with the very same result, and the
    // combined parser must answer exactly as the reference does (same
    // append, or the same error).
    let body = bytes::Bytes::copy_from_slice(data);
    let combined = crate::decode::json_append::parse(&body);
    match (&reference, &combined) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "fast path disagrees with the reference parser"),
        (Err(a), Err(b)) => assert_eq!(a, b, "the combined parser explains differently"),
        _ => panic!("fast path accepted what the reference refuses, or the reverse: {reference:?} vs {combined:?}"),
    }
}

/// The front's head reader (`crate::server::front_head`) never panics, and what
/// it takes is exactly one request that hyper's parser would frame the
/// same way: the head httparse completes at the same length, the body
/// its one `Content-Length` declares (none: empty), all within the cap;
/// more bytes after it change nothing (pipelining), fewer make it partial.
/// The first byte picks the cap (in units of 64 bytes, at least 64).
pub fn http_front_head(data: &[u8]) {
    use crate::server::front_head::{parse, Head};
    let Some((&cap_byte, buf)) = data.split_first() else {
        return;
    };
    let cap_bytes = 64 * (usize::from(cap_byte) + 1);
    let located = match parse(buf, cap_bytes) {
        // Waiting for more is bounded: never at or past the cap.
        Head::Partial { .. } => return assert!(buf.len() < cap_bytes),
        Head::Hyper => return,
        Head::Whole(located) => located,
    };
    let total = located.head_bytes + located.body_bytes;
    assert!(
        total <= buf.len() && total <= cap_bytes,
        "taken past the buffer or the cap"
    );
    let mut headers = [httparse::EMPTY_HEADER; crate::server::front_head::HEADERS_MAX];
    let mut req = httparse::Request::new(&mut headers);
    let reparsed = req.parse(&buf[..located.head_bytes]);
    assert_eq!(
        reparsed.ok(),
        Some(httparse::Status::Complete(located.head_bytes))
    );
    assert_eq!(req.version, Some(1));
    let lengths: Vec<&[u8]> = req
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("content-length"))
        .map(|h| h.value)
        .collect();
    let declared = match lengths[..] {
        [] => 0,
        [one] => std::str::from_utf8(one)
            .ok()
            .and_then(|text| text.parse::<usize>().ok())
            .expect("the front takes a head only with a numeric Content-Length"),
        _ => panic!("two lengths taken"),
    };
    assert_eq!(declared, located.body_bytes);
    let head = bytes::Bytes::copy_from_slice(&buf[..located.head_bytes]);
    let parts = located.to_parts(&head);
    if let Some(parts) = &parts {
        let method = req
            .method
            .expect("httparse read the whole head again: it has a method");
        assert_eq!(parts.method.as_str(), method);
        assert_eq!(parts.headers.len(), req.headers.len());
    }
    if let Some((stream, view)) = located.append_view(&head) {
        same_reading(stream, &view, parts.as_ref());
    }
    // More bytes after a whole request (the next, pipelined) change
    // nothing about it; a request one byte short is not yet whole.
    let mut longer = buf[..total].to_vec();
    longer.extend_from_slice(b"GET / HTTP/1.1\r\n");
    match parse(&longer, cap_bytes) {
        Head::Whole(again) => {
            assert_eq!(
                (again.head_bytes, again.body_bytes),
                (located.head_bytes, located.body_bytes)
            )
        }
        other => panic!("a pipelined tail changed the reading: {other:?}"),
    }
    if total > 0 {
        assert!(matches!(
            parse(&buf[..total - 1], cap_bytes),
            Head::Partial { .. }
        ));
    }
}

/// A request the front reads from its buffer (`Located::append_view`)
/// reads as `http` reads it: `http` takes its head, the stream segment is
/// the path's, and every header has the same values in the same order.
fn same_reading(
    stream: &str,
    view: &crate::server::front_head::SliceHeaders<'_>,
    parts: Option<&axum::http::request::Parts>,
) {
    use crate::decode::header_view::HeaderView;
    let parts = parts.expect("read from the buffer, refused by http");
    let matched =
        crate::routes::append_route::AppendRoute::matches_path(&parts.method, parts.uri.path());
    assert_eq!(matched, Some(stream));
    assert_eq!(view.size_bytes(), parts.headers.size_bytes());
    for name in parts.headers.keys() {
        let ours: Vec<&[u8]> = view.values_of(name).collect();
        let theirs: Vec<&[u8]> = parts.headers.values_of(name).collect();
        assert_eq!(ours, theirs, "header {name}");
    }
}
