//! Damage to files at rest. Every case must end in one of two ways: the
//! log opens and the only records missing are the ones recovery may
//! legally cut (a torn last group), or open refuses with `Corrupt` naming
//! the file and an offset inside it. Every record served must be exactly
//! what was acknowledged.

use super::*;
use fencelog_engine::sim::Resolution;
use fencelog_engine::testing::{
    decode_frame, decode_segment_header, encode_segment_header, Manifest, FORMAT_VERSION,
    SEGMENT_HEADER_BYTES,
};
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
pub struct CorruptionSuite {
    pub seed: u64,
    pub steps: usize,
    pub segment_bytes: u64,
    pub flips: usize,
}

#[derive(Debug, Default)]
pub struct CorruptionStats {
    pub segments: usize,
    pub cases: u64,
    pub opened: u64,
    pub refused: u64,
    /// Opened after a bit flip that the torn-tail rule cut away, losing the
    /// last synced group (the documented limitation).
    pub flips_cut_as_torn: u64,
}

#[derive(Debug, Clone, Copy)]
pub struct FrameInfo {
    pub offset: usize,
    pub end: usize,
    pub group_id: u64,
    pub records: u64,
}

pub fn frames(seg: &[u8]) -> Vec<FrameInfo> {
    let mut out = Vec::new();
    let mut off = SEGMENT_HEADER_BYTES;
    while off < seg.len() {
        if seg[off..].iter().all(|&b| b == 0) {
            break; // the writer's preallocated space
        }
        let f = decode_frame(&seg[off..], FORMAT_VERSION).expect("the base log decodes");
        out.push(FrameInfo {
            offset: off,
            end: off + f.frame_len,
            group_id: f.header.group_id,
            records: f.header.record_count as u64,
        });
        off += f.frame_len;
    }
    out
}

/// A cleanly shut down log of several segments and the model of it.
pub fn base_log(suite: &CorruptionSuite) -> Result<(SimStorage, Model, Vec<String>), String> {
    let rt = runtime();
    let cfg = config(suite.segment_bytes);
    let sim = SimStorage::new();
    let engine = open(&sim, &cfg).map_err(|e| e.to_string())?;
    let model = rt.block_on(run_script(&engine, &script(suite.seed, suite.steps)))?;
    rt.block_on(engine.shutdown());
    drop(engine);
    sim.crash(Resolution::DropAll);
    let segs: Vec<String> = sim
        .file_names()
        .into_iter()
        .filter(|n| n.ends_with(".seg"))
        .collect();
    if segs.len() < 3 {
        return Err(format!("base log has only {} segments", segs.len()));
    }
    Ok((sim, model, segs))
}

struct Checker<'a> {
    cfg: Config,
    model: &'a Model,
    total: u64,
    stats: CorruptionStats,
}

enum Expect {
    /// Must open with nothing acknowledged lost.
    Intact,
    /// Must open; exactly this many acknowledged records may be missing.
    Loses(u64),
    /// Must refuse, naming this file.
    Refuse(String),
    /// Either opens losing at most this many records, or refuses naming
    /// this file.
    Either(u64, String),
}

impl Checker<'_> {
    fn case(&mut self, disk: &SimStorage, what: &str, expect: Expect) -> Result<Opened, String> {
        self.stats.cases += 1;
        let fail = |m: String| format!("{what}: {m}");
        match open(disk, &self.cfg) {
            Ok(engine) => {
                self.stats.opened += 1;
                let d = verify(&engine, self.model, Mode::Prefix).map_err(&fail)?;
                let lost = self.total - dump_records(&d).min(self.total);
                let ok = match &expect {
                    Expect::Intact => lost == 0,
                    Expect::Loses(n) => lost == *n,
                    Expect::Either(n, _) => lost <= *n,
                    Expect::Refuse(_) => false,
                };
                if !ok {
                    return Err(fail(format!(
                        "opened and lost {lost} acknowledged records (report {:?})",
                        engine.recovery_report()
                    )));
                }
                // A cut may take a fence frame with it; only an intact log
                // must keep every acknowledged token.
                if matches!(expect, Expect::Intact) {
                    verify(&engine, self.model, Mode::Recovered).map_err(&fail)?;
                }
                Ok(Opened::Yes(engine.recovery_report().clone()))
            }
            Err(OpenError::Corrupt(c)) => {
                self.stats.refused += 1;
                let named = match &expect {
                    Expect::Refuse(f) | Expect::Either(_, f) => f,
                    _ => return Err(fail(format!("refused to open: {c}"))),
                };
                if &c.file != named {
                    return Err(fail(format!("refusal names {}, not {named}: {c}", c.file)));
                }
                let len = disk.contents(&c.file).map(|b| b.len() as u64).unwrap_or(0);
                if c.offset > len {
                    return Err(fail(format!(
                        "refusal offset {} is past the file end {len}",
                        c.offset
                    )));
                }
                Ok(Opened::No)
            }
            Err(e) => Err(fail(format!(
                "open failed with a non-corruption error: {e}"
            ))),
        }
    }
}

enum Opened {
    Yes(fencelog_engine::RecoveryReport),
    No,
}

pub fn corruption(suite: &CorruptionSuite) -> Result<CorruptionStats, String> {
    let fail = |what: String| format!("seed {}: {what}", suite.seed);
    let (base, model, segs) = base_log(suite).map_err(&fail)?;
    let mut ck = Checker {
        cfg: config(suite.segment_bytes),
        model: &model,
        total: acked_records(&model),
        stats: CorruptionStats {
            segments: segs.len(),
            ..Default::default()
        },
    };
    let last = segs.last().unwrap().clone();
    // Without the preallocated zeros: the cases below damage the data.
    let last_bytes = {
        let b = base.contents(&last).unwrap();
        let end = frames(&b).last().map_or(SEGMENT_HEADER_BYTES, |f| f.end);
        b[..end].to_vec()
    };
    // The writer cuts its preallocation before it creates the next segment,
    // so cases that add a segment after this one start from the cut file.
    base.set_contents(&last, &last_bytes);
    let last_frames = frames(&last_bytes);
    let with = |name: &str, bytes: &[u8]| {
        let d = base.fork();
        d.set_contents(name, bytes);
        d
    };
    ck.case(&base.fork(), "untouched", Expect::Intact)
        .map_err(&fail)?;

    // Torn tail at every byte of the last three frames: the groups that
    // no longer end inside the file are cut, nothing else.
    let from = last_frames[last_frames.len().saturating_sub(3)].offset;
    for cut in from..last_bytes.len() {
        let mut group_end: BTreeMap<u64, (usize, u64)> = BTreeMap::new();
        for f in &last_frames {
            let e = group_end.entry(f.group_id).or_default();
            e.0 = e.0.max(f.end);
            e.1 += f.records;
        }
        let lost: u64 = group_end
            .values()
            .filter(|(end, _)| *end > cut)
            .map(|g| g.1)
            .sum();
        ck.case(
            &with(&last, &last_bytes[..cut]),
            &format!("{last} torn at byte {cut}"),
            Expect::Loses(lost),
        )
        .map_err(&fail)?;
    }

    // A tail of zeros or garbage, as a growing file shows after a crash.
    let mut rng = Rng::new(suite.seed ^ 0xBAD);
    for n in [1usize, 3, 4, 11, 55, 56, 57, 300, 4096] {
        for garbage in [false, true] {
            let mut b = last_bytes.clone();
            let mut tail = vec![0u8; n];
            if garbage {
                rng.fill(&mut tail);
            }
            b.extend_from_slice(&tail);
            let what = format!(
                "{last} + {n} bytes of {}",
                if garbage { "garbage" } else { "zeros" }
            );
            match ck
                .case(&with(&last, &b), &what, Expect::Intact)
                .map_err(&fail)?
            {
                Opened::Yes(r) if r.truncated.is_some() => {}
                // Zeros after a complete group look exactly like the
                // writer's preallocated space, and are released as such.
                Opened::Yes(r) if !garbage && r.preallocated_bytes_released == n as u64 => {}
                _ => return Err(fail(format!("{what}: the tail was not reported truncated"))),
            }
        }
    }

    // Random single-bit flips across segment headers, old segments and
    // the tail.
    for i in 0..suite.flips {
        let (name, at) = match i % 3 {
            0 => (
                segs[rng.below(segs.len() as u64) as usize].clone(),
                rng.below(40) as usize,
            ),
            1 => {
                let name = segs[rng.below(segs.len() as u64 - 1) as usize].clone();
                let len = base.contents(&name).unwrap().len() as u64;
                (name, rng.range(40, len - 1) as usize)
            }
            _ => (
                last.clone(),
                rng.range(40, last_bytes.len() as u64 - 1) as usize,
            ),
        };
        let mut b = base.contents(&name).unwrap();
        let bit = rng.below(8);
        b[at] ^= 1 << bit;
        // Only a flip inside the last group of the last segment may be
        // taken for a torn write: that group is then cut whole.
        let last_group = last_frames.last().unwrap().group_id;
        let in_last_group = name == last
            && last_frames
                .iter()
                .any(|f| f.group_id == last_group && f.offset <= at && at < f.end);
        let lost_if_cut: u64 = last_frames
            .iter()
            .filter(|f| f.group_id == last_group)
            .map(|f| f.records)
            .sum();
        let expect = if in_last_group {
            Expect::Either(lost_if_cut, name.to_string())
        } else {
            Expect::Refuse(name.to_string())
        };
        let what = format!("flip {i}: bit {bit} of byte {at} in {name}");
        if let Opened::Yes(r) = ck.case(&with(&name, &b), &what, expect).map_err(&fail)? {
            ck.stats.flips_cut_as_torn += r.truncated.is_some() as u64;
        }
    }

    // A truncated segment header: in the middle it is damage; as a new
    // last segment it is a roll that crashed before its header was synced.
    let mid = segs[1].clone();
    let mid_bytes = base.contents(&mid).unwrap();
    ck.case(
        &with(&mid, &mid_bytes[..20]),
        "middle header truncated",
        Expect::Refuse(mid.clone()),
    )
    .map_err(&fail)?;
    let next = next_segment_name(&last);
    let header_prefix = &base.contents(&segs[0]).unwrap()[..20];
    match ck
        .case(
            &with(&next, header_prefix),
            "new last segment with half a header",
            Expect::Intact,
        )
        .map_err(&fail)?
    {
        Opened::Yes(r) if r.removed_segment.as_deref() == Some(next.as_str()) => {}
        _ => return Err(fail("a half-made last segment was not removed".into())),
    }
    let last_records: u64 = last_frames.iter().map(|f| f.records).sum();
    ck.case(
        &with(&last, &last_bytes[..20]),
        "last segment cut inside its header",
        Expect::Either(last_records, last.clone()),
    )
    .map_err(&fail)?;

    // A segment missing from the middle.
    let d = base.fork();
    d.delete(&mid);
    ck.case(&d, "middle segment missing", Expect::Refuse(mid.clone()))
        .map_err(&fail)?;
    missing_ends(&mut ck, &base, &segs).map_err(&fail)?;

    // Zero-length and foreign files.
    ck.case(
        &with("notes.txt", b"hello"),
        "foreign file",
        Expect::Refuse("notes.txt".into()),
    )
    .map_err(&fail)?;
    ck.case(
        &with("x", b""),
        "zero-length foreign file",
        Expect::Refuse("x".into()),
    )
    .map_err(&fail)?;
    ck.case(
        &with(&next, b""),
        "zero-length new last segment",
        Expect::Intact,
    )
    .map_err(&fail)?;
    ck.case(
        &with(&mid, b""),
        "zero-length middle segment",
        Expect::Refuse(mid.clone()),
    )
    .map_err(&fail)?;
    ck.case(&with("LOCK", b""), "lock file", Expect::Intact)
        .map_err(&fail)?;
    Ok(ck.stats)
}

/// The first or the LAST segment deleted while the server was
/// stopped, or the MANIFEST that lists them, is refused naming the file —
/// never taken for a shorter log. A roll cut between its new segment
/// becoming durable and the MANIFEST naming it is adopted (nothing can be
/// in it yet); the same segment holding frames means the MANIFEST is
/// older than the log, and is refused.
fn missing_ends(ck: &mut Checker<'_>, base: &SimStorage, segs: &[String]) -> Result<(), String> {
    let (first, last) = (&segs[0], segs.last().unwrap());
    for (gone, what) in [(first, "first"), (last, "last")] {
        let d = base.fork();
        d.delete(gone);
        ck.case(
            &d,
            &format!("{what} segment missing"),
            Expect::Refuse(gone.clone()),
        )?;
    }
    let d = base.fork();
    d.delete("MANIFEST");
    ck.case(&d, "MANIFEST missing", Expect::Refuse(first.clone()))?;
    let d = base.fork();
    d.delete("MANIFEST");
    d.delete(last);
    ck.case(
        &d,
        "MANIFEST and last segment missing",
        Expect::Refuse(first.clone()),
    )?;

    let manifest = Manifest::decode(&base.contents("MANIFEST").unwrap()).unwrap();
    let listed: Vec<u64> = manifest.indices().collect();
    let behind = Manifest {
        ranges: Manifest::ranges_of(listed[..listed.len() - 1].iter().copied()),
        ..manifest.clone()
    };
    let d = base.fork();
    d.set_contents("MANIFEST", &behind.encode());
    ck.case(
        &d,
        "MANIFEST one roll behind a segment with frames",
        Expect::Refuse(last.clone()),
    )?;

    // A whole, durable header of the next segment and nothing else: the
    // roll's MANIFEST rewrite never happened.
    let next = next_segment_name(last);
    let mut header = decode_segment_header(&base.contents(last).unwrap()).unwrap();
    header.segment_index += 1;
    header.first_group_id = frames(&base.contents(last).unwrap())
        .last()
        .map_or(header.first_group_id, |f| f.group_id + 1);
    let d = base.fork();
    d.set_contents(&next, &encode_segment_header(&header));
    match ck.case(&d, "roll not yet in the MANIFEST", Expect::Intact)? {
        Opened::Yes(r) if r.adopted_roll.as_deref() == Some(next.as_str()) => {}
        _ => return Err(format!("{next}: an unlisted new segment was not adopted")),
    }
    // The adoption rewrote the MANIFEST durably: after a power cut the
    // next open finds the segment listed.
    d.crash(Resolution::DropAll);
    let again = open(&d, &ck.cfg).map_err(|e| format!("reopen after adoption: {e}"))?;
    if again.recovery_report().adopted_roll.is_some() {
        return Err("the MANIFEST was not rewritten to list the adopted roll".into());
    }
    Ok(())
}

pub fn next_segment_name(last: &str) -> String {
    let n: u64 = last.trim_end_matches(".seg").parse().unwrap();
    format!("{:020}.seg", n + 1)
}

/// What the lifecycle corruption cases found.
#[derive(Debug, Default)]
pub struct LifecycleCorruptionStats {
    pub checkpoint_bytes: usize,
    pub manifest_bytes: usize,
    pub compacted_segments: usize,
    pub cases: u64,
}

/// Damage to what reclamation leaves behind: every byte of the checkpoint
/// and of the MANIFEST flipped, the checkpoint cut at every length, and
/// random flips inside segments that received compacted (RELOCATED)
/// frames. Each must refuse to open naming the damaged file (a checkpoint
/// or MANIFEST is never guessed around: it may be the only copy of a
/// fence); a flip in the last group of the last segment may instead be cut
/// as a torn write.
pub fn lifecycle_corruption(suite: &CorruptionSuite) -> Result<LifecycleCorruptionStats, String> {
    let fail = |what: String| format!("seed {}: {what}", suite.seed);
    let rt = runtime();
    let cfg = config(suite.segment_bytes);
    let base = SimStorage::new();
    let engine = open(&base, &cfg).map_err(|e| fail(e.to_string()))?;
    let model = rt
        .block_on(run_script(
            &engine,
            &lifecycle_script(suite.seed, suite.steps),
        ))
        .map_err(&fail)?;
    rt.block_on(engine.shutdown());
    drop(engine);
    base.crash(Resolution::DropAll);
    let names = base.file_names();
    let ckpt = names
        .iter()
        .find(|n| n.ends_with(".ckpt"))
        .cloned()
        .ok_or_else(|| fail(format!("no checkpoint among {names:?}")))?;
    let segs: Vec<String> = names
        .iter()
        .filter(|n| n.ends_with(".seg"))
        .cloned()
        .collect();
    let last = segs.last().cloned().unwrap_or_default();
    let compacted: Vec<String> = segs
        .iter()
        .filter(|s| {
            frames_of(&base.contents(s).unwrap())
                .iter()
                .any(|(f, relocated)| *relocated && f.records > 0)
        })
        .cloned()
        .collect();
    if compacted.is_empty() {
        return Err(fail(format!(
            "no segment holds a compacted frame: {segs:?}"
        )));
    }
    // Readable records of the intact log: trims make this less than what
    // was acknowledged.
    let total = {
        let e = open(&base.fork(), &cfg).map_err(|e| fail(format!("intact: {e}")))?;
        dump_records(&verify(&e, &model, Mode::Recovered).map_err(&fail)?)
    };
    let mut ck = Checker {
        cfg,
        model: &model,
        total,
        stats: CorruptionStats::default(),
    };
    let with = |name: &str, bytes: &[u8]| {
        let d = base.fork();
        d.set_contents(name, bytes);
        d
    };
    let mut rng = Rng::new(suite.seed ^ 0xC4EC);
    for file in [ckpt.as_str(), "MANIFEST"] {
        let bytes = base.contents(file).unwrap();
        for at in 0..bytes.len() {
            let mut b = bytes.clone();
            let bit = rng.below(8);
            b[at] ^= 1 << bit;
            let what = format!("bit {bit} of byte {at} of {file} flipped");
            ck.case(&with(file, &b), &what, Expect::Refuse(file.into()))
                .map_err(&fail)?;
        }
    }
    let ckpt_bytes = base.contents(&ckpt).unwrap();
    for len in 0..ckpt_bytes.len() {
        let what = format!("{ckpt} cut to {len} bytes");
        ck.case(
            &with(&ckpt, &ckpt_bytes[..len]),
            &what,
            Expect::Refuse(ckpt.clone()),
        )
        .map_err(&fail)?;
    }
    for seg in &compacted {
        let bytes = base.contents(seg).unwrap();
        let fs = frames_of(&bytes);
        let last_group = fs.last().map(|(f, _)| f.group_id);
        for _ in 0..suite.flips {
            let (f, _) = fs[rng.below(fs.len() as u64) as usize];
            // `range` is inclusive and `end` is where the next frame starts.
            let at = rng.range(f.offset as u64, f.end as u64 - 1) as usize;
            let mut b = bytes.clone();
            b[at] ^= 1 << rng.below(8);
            let what = format!("byte {at} of compacted {seg} flipped");
            let expect = if *seg == last && Some(f.group_id) == last_group {
                Expect::Either(u64::MAX, seg.clone())
            } else {
                Expect::Refuse(seg.clone())
            };
            ck.case(&with(seg, &b), &what, expect).map_err(&fail)?;
        }
    }
    Ok(LifecycleCorruptionStats {
        checkpoint_bytes: ckpt_bytes.len(),
        manifest_bytes: base.contents("MANIFEST").unwrap().len(),
        compacted_segments: compacted.len(),
        cases: ck.stats.cases,
    })
}

/// The frames of a segment with whether each is a compacted copy.
fn frames_of(seg: &[u8]) -> Vec<(FrameInfo, bool)> {
    frames(seg)
        .into_iter()
        .map(|f| {
            let relocated = decode_frame(&seg[f.offset..], FORMAT_VERSION)
                .map(|d| d.header.relocated())
                .unwrap_or(false);
            (f, relocated)
        })
        .collect()
}
