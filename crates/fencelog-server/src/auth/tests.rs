use super::secret::{parse_hex32, SECRET_BYTES};
use super::*;
use axum::http::{header, HeaderMap, HeaderValue};
use fencelog_api::{ErrorCode, Field};

fn settings(name: &str, secret: &str, scopes: &[&str], prefix: &str) -> TokenSettings {
    TokenSettings {
        name: name.into(),
        sha256: to_hex(&hash_secret(secret)),
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
        stream_prefix: prefix.into(),
    }
}

#[test]
fn hex_round_trips_and_the_hash_is_sha256() {
    // SHA-256("abc"), FIPS 180-2 appendix B.1.
    assert_eq!(
        to_hex(&hash_secret("abc")),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    let h = hash_secret("x");
    assert_eq!(parse_hex32(&to_hex(&h)), Some(h));
    assert_eq!(parse_hex32(&to_hex(&h).to_uppercase()), Some(h));
    assert_eq!(parse_hex32("zz"), None);
    assert!(constant_time_eq(&h, &h));
    let mut other = h;
    other[31] ^= 1;
    assert!(!constant_time_eq(&h, &other));
}

#[test]
fn tokens_authenticate_and_scopes_and_prefixes_authorize() {
    let auth = Auth::from_settings(&AuthSettings {
        tokens: vec![settings("w", "s3cret", &["append", "read"], "orders-")],
    })
    .unwrap();
    let bearer = |s: &str| HeaderValue::from_str(&format!("Bearer {s}")).unwrap();
    let with = |values: &[HeaderValue]| {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(header::AUTHORIZATION, v.clone());
        }
        headers
    };
    let good = with(&[bearer("s3cret")]);
    let p = auth.authenticate(&good).unwrap().unwrap();
    assert_eq!(&*p.name, "w");
    for bad in [
        with(&[]),
        with(&[bearer("nope")]),
        with(&[HeaderValue::from_static("Basic x")]),
        with(&[bearer("s3cret"), bearer("s3cret")]),
    ] {
        let e = auth.authenticate(&bad).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Unauthenticated);
    }
    assert!(authorize(Some(p), Scope::Append, Some("orders-1")).is_ok());
    let e = authorize(Some(p), Scope::Fence, Some("orders-1")).unwrap_err();
    assert_eq!(e.body.get(Field::Scope), Some(&"fence".into()));
    let e = authorize(Some(p), Scope::Append, Some("billing")).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Forbidden);
    assert!(authorize(None, Scope::Admin, None).is_ok());
}

#[test]
fn bad_stanzas_are_refused_with_the_reason() {
    let cases = [
        (settings("", "a", &["read"], ""), "name"),
        (settings("a", "a", &[], ""), "scopes must not be empty"),
        (
            settings("a", "a", &["write"], ""),
            "unknown scope \"write\"",
        ),
        (
            TokenSettings {
                sha256: "abc".into(),
                ..settings("a", "a", &["read"], "")
            },
            "64 hex digits",
        ),
    ];
    for (t, why) in cases {
        let e = Auth::from_settings(&AuthSettings { tokens: vec![t] }).unwrap_err();
        assert!(e.contains(why), "{e}");
    }
    let twice = AuthSettings {
        tokens: vec![
            settings("a", "x", &["read"], ""),
            settings("a", "y", &["read"], ""),
        ],
    };
    assert!(Auth::from_settings(&twice).unwrap_err().contains("twice"));
}

#[test]
fn secrets_are_random_and_long() {
    let a = generate_secret().unwrap();
    let b = generate_secret().unwrap();
    assert_ne!(a, b);
    assert_eq!(a.len(), 3 + 2 * SECRET_BYTES);
}
