//! Receiving a snapshot chunk by chunk: what arrives whole and checked is
//! handed over; anything else is refused and changes nothing handed over.

use super::*;
use tempfile::TempDir;

fn chunk(name: &str, offset: u64, data: &[u8]) -> Chunk {
    Chunk {
        from: 2,
        snapshot_id: "1-1-9-1".into(),
        name: name.into(),
        offset,
        crc32: crc32fast::hash(data),
        data: data.to_vec(),
    }
}

fn manifest(files: &[(&str, u64)]) -> Manifest {
    Manifest {
        from: 2,
        files: files
            .iter()
            .map(|(n, l)| SnapFile {
                name: n.to_string(),
                len: *l,
            })
            .collect(),
    }
}

fn receiving(root: &TempDir) -> Receiving {
    Receiving::start(2, "1-1-9-1", root.path().join("recv-000001")).unwrap()
}

#[test]
fn chunks_in_order_make_the_files_of_the_manifest() {
    let root = TempDir::new().unwrap();
    let r = receiving(&root);
    assert!(r.is(2, "1-1-9-1") && !r.is(3, "1-1-9-1") && !r.is(2, "1-1-9-2"));
    r.write(&chunk("00000000000000000000.seg", 0, b"abc"))
        .unwrap();
    r.write(&chunk("00000000000000000000.seg", 3, b"defg"))
        .unwrap();
    r.write(&chunk("MANIFEST", 0, b"")).unwrap();
    let (dir, files) = r
        .finish(&manifest(&[
            ("00000000000000000000.seg", 7),
            ("MANIFEST", 0),
        ]))
        .unwrap();
    let seg = std::fs::read(dir.path().join("00000000000000000000.seg")).unwrap();
    assert_eq!(seg, b"abcdefg");
    assert_eq!(files.len(), 2);
    let path = dir.path().to_path_buf();
    drop(dir);
    assert!(!path.exists(), "the last handle removes the directory");
}

#[test]
fn a_chunk_at_offset_zero_starts_its_file_again() {
    let root = TempDir::new().unwrap();
    let r = receiving(&root);
    r.write(&chunk("MANIFEST", 0, b"old bytes")).unwrap();
    r.write(&chunk("MANIFEST", 0, b"new")).unwrap();
    let (dir, _) = r.finish(&manifest(&[("MANIFEST", 3)])).unwrap();
    assert_eq!(std::fs::read(dir.path().join("MANIFEST")).unwrap(), b"new");
}

/// A chunk sent again after later ones arrived (an attempt's lost
/// answer, then a resumed attempt) changes nothing: the transfer goes on.
/// One with other bytes at that place is refused.
#[test]
fn a_chunk_that_arrived_already_is_a_no_op() {
    let root = TempDir::new().unwrap();
    let r = receiving(&root);
    r.write(&chunk("MANIFEST", 0, b"abc")).unwrap();
    r.write(&chunk("MANIFEST", 3, b"def")).unwrap();
    r.write(&chunk("MANIFEST", 0, b"abc")).unwrap();
    r.write(&chunk("MANIFEST", 3, b"def")).unwrap();
    let e = r.write(&chunk("MANIFEST", 3, b"xyz")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "snapshot chunk of MANIFEST at 3, but 6 bytes were received"
    );
    r.write(&chunk("MANIFEST", 6, b"g")).unwrap();
    let (dir, _) = r.finish(&manifest(&[("MANIFEST", 7)])).unwrap();
    assert_eq!(
        std::fs::read(dir.path().join("MANIFEST")).unwrap(),
        b"abcdefg"
    );
}

#[test]
fn a_damaged_gapped_oversized_or_misnamed_chunk_is_refused() {
    let root = TempDir::new().unwrap();
    let r = receiving(&root);
    let mut bad = chunk("MANIFEST", 0, b"bytes");
    bad.data[0] ^= 1;
    let e = r.write(&bad).unwrap_err();
    assert_eq!(
        e.to_string(),
        "snapshot chunk of MANIFEST at 0 fails its CRC"
    );
    assert!(
        !r.dir.path().join("MANIFEST").exists(),
        "a refused chunk writes nothing"
    );
    r.write(&chunk("MANIFEST", 0, b"12")).unwrap();
    let e = r.write(&chunk("MANIFEST", 3, b"4")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "snapshot chunk of MANIFEST at 3, but 2 bytes were received"
    );
    let e = r.write(&chunk("x.seg", 1, b"4")).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    let big = chunk("MANIFEST", 2, &vec![0; CHUNK_BYTES + 1]);
    let e = r.write(&big).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("a snapshot chunk of {} bytes", CHUNK_BYTES + 1)
    );
    let e = r.write(&chunk("a", FILE_BYTES_MAX, b"1")).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("snapshot file a over {FILE_BYTES_MAX} bytes")
    );
    for name in ["", "../x", "a/b", ".hidden", "LOCK", "a b"] {
        let e = r.write(&chunk(name, 0, b"1")).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("snapshot file name {name:?} refused")
        );
    }
    assert_eq!(std::fs::read(r.dir.path().join("MANIFEST")).unwrap(), b"12");
}

#[test]
fn a_transfer_short_of_its_manifest_is_refused_and_removed() {
    let root = TempDir::new().unwrap();
    let r = receiving(&root);
    let path = r.dir.path().to_path_buf();
    r.write(&chunk("MANIFEST", 0, b"12")).unwrap();
    let e = r
        .finish(&manifest(&[
            ("00000000000000000000.seg", 4),
            ("MANIFEST", 2),
        ]))
        .unwrap_err();
    assert!(
        e.to_string().starts_with("snapshot 1-1-9-1 arrived as"),
        "{e}"
    );
    assert!(!path.exists(), "a refused transfer's directory goes");
}

#[test]
fn a_capture_links_what_never_changes_and_copies_the_active_segment() {
    use std::os::unix::fs::MetadataExt;
    let root = TempDir::new().unwrap();
    let src = root.path().join("gen-000000");
    std::fs::create_dir(&src).unwrap();
    for (name, bytes) in [
        ("00000000000000000001.seg", &b"sealed"[..]),
        ("00000000000000000002.seg", b"active"),
        ("MANIFEST", b"m"),
        ("LOCK", b""),
    ] {
        std::fs::write(src.join(name), bytes).unwrap();
    }
    let dst = root.path().join("snap-000001");
    let files = capture(&src, &dst, true, Active::Copied).unwrap();
    let names: Vec<_> = files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "00000000000000000001.seg",
            "00000000000000000002.seg",
            "MANIFEST"
        ]
    );
    let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
    for (name, linked) in [
        ("00000000000000000001.seg", true),
        ("00000000000000000002.seg", false),
        ("MANIFEST", true),
    ] {
        assert_eq!(
            ino(&src.join(name)) == ino(&dst.join(name)),
            linked,
            "{name}"
        );
    }
    // What the engine writes in its active segment stays out of the copy.
    std::fs::write(src.join("00000000000000000002.seg"), b"active and more").unwrap();
    assert_eq!(
        std::fs::read(dst.join("00000000000000000002.seg")).unwrap(),
        b"active"
    );
}

#[test]
fn a_chunk_crosses_the_wire_whole_and_a_cut_one_is_refused() {
    let c = chunk("00000000000000000000.seg", 7, &[1, 2, 3, 0, 255]);
    let wire = c.to_wire();
    assert_eq!(Chunk::from_wire(&wire).unwrap(), c);
    let e = Chunk::from_wire(&wire[..wire.len() - 1]).unwrap_err();
    assert_eq!(e, "a chunk of 4 bytes says 5");
    let mut other = wire.clone();
    other[0] = 9;
    assert_eq!(
        Chunk::from_wire(&other).unwrap_err(),
        "wire version 9, expected 1"
    );
    assert_eq!(Chunk::from_wire(&[]).unwrap_err(), "an empty message");
}
