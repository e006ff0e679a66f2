//! The suites' seeded scripts: the original one (appends, fences, stale
//! writers, `match_seq_num`, bursts) and the lifecycle one, which adds
//! trims, seals, deletes and recreations, retention, and reclamation passes
//! (checkpoints, compaction, segment deletion) among the same traffic.

use super::{MatchSeq, Step, TrimTo};
use fencelog_engine::sim::Rng;

/// A deterministic script: appends in batches, fences (some data-less, some
/// re-fences), stale writers, `match_seq_num` both ways, and bursts where a
/// higher token arrives before a lower one in the same group. Ends with a
/// data-less fence on every stream so the highest token must come from a
/// fence frame.
pub fn script(seed: u64, steps: usize) -> Vec<Step> {
    let mut rng = Rng::new(seed);
    let mut tok = [1u64; 4];
    let mut out = Vec::new();
    for _ in 0..steps {
        if rng.chance(1, 6) {
            let n = rng.range(3, 8);
            let burst = (0..n).map(|_| plain(&mut rng, &mut tok, 3)).collect();
            out.push(Step::Burst(burst));
        } else {
            out.push(plain(&mut rng, &mut tok, 3));
        }
    }
    for (s, t) in tok.iter().take(3).enumerate() {
        out.push(Step::Fence {
            stream: s,
            token: t + 1,
        });
    }
    out
}

/// One step of the original mix on one of the first `streams` streams.
fn plain(rng: &mut Rng, tok: &mut [u64; 4], streams: u64) -> Step {
    let s = rng.below(streams) as usize;
    match rng.below(100) {
        0..=54 => Step::Append {
            stream: s,
            token: tok[s],
            records: rng.range(1, 4) as usize,
            size: rng.range(8, 200) as usize,
            match_seq: MatchSeq::No,
        },
        55..=66 => {
            tok[s] += rng.below(3);
            Step::Fence {
                stream: s,
                token: tok[s],
            }
        }
        67..=76 => Step::Append {
            stream: s,
            token: tok[s].saturating_sub(1).max(1),
            records: 1,
            size: 16,
            match_seq: MatchSeq::No,
        },
        77..=84 => {
            tok[s] += 1;
            Step::Append {
                stream: s,
                token: tok[s],
                records: 2,
                size: 40,
                match_seq: MatchSeq::No,
            }
        }
        _ => Step::Append {
            stream: s,
            token: tok[s],
            records: 1,
            size: 24,
            match_seq: if rng.chance(1, 2) {
                MatchSeq::Right
            } else {
                MatchSeq::Wrong
            },
        },
    }
}

/// Stream 0 is trimmed often, stream 1 is slow (its few early records pin
/// segments, so compaction must carry them), stream 2 has retention by
/// size, stream 3 is sealed, deleted, recreated above its tombstone and
/// deleted again; stale owners try each. Reclamation passes come every few
/// steps and once more at the end.
pub fn lifecycle_script(seed: u64, steps: usize) -> Vec<Step> {
    let mut rng = Rng::new(seed ^ 0x11FE);
    let mut tok = [1u64; 4];
    let mut out = vec![
        Step::Append {
            stream: 1,
            token: 1,
            records: 1,
            size: 60,
            match_seq: MatchSeq::No,
        },
        Step::Config {
            stream: 2,
            retention_bytes: Some(rng.range(600, 1500)),
        },
    ];
    for i in 0..steps {
        let step = match rng.below(100) {
            0..=49 => plain(&mut rng, &mut tok, 3),
            50..=59 => Step::Trim {
                stream: 0,
                token: tok[0],
                to: TrimTo::Inside(rng.range(30, 95) as u8),
            },
            60..=62 => Step::Trim {
                stream: rng.below(3) as usize,
                token: tok[0].saturating_sub(1).max(1),
                to: [TrimTo::Below, TrimTo::Past][rng.below(2) as usize],
            },
            63..=77 => doomed(&mut rng, &mut tok),
            78..=84 => Step::Burst(vec![
                plain(&mut rng, &mut tok, 3),
                Step::Trim {
                    stream: 0,
                    token: tok[0],
                    to: TrimTo::Inside(80),
                },
                plain(&mut rng, &mut tok, 3),
                doomed(&mut rng, &mut tok),
            ]),
            _ => Step::Reclaim,
        };
        out.push(step);
        if i % 12 == 11 {
            out.push(Step::Reclaim);
        }
    }
    out.push(Step::Reclaim);
    for (s, t) in tok.iter().enumerate() {
        out.push(Step::Fence {
            stream: s,
            token: t + 1,
        });
    }
    out
}

/// A step on stream 3: writes, a seal (and stale seals), a delete (and a
/// stale owner trying to resurrect it with the tombstone's token), a
/// recreation with a higher token.
fn doomed(rng: &mut Rng, tok: &mut [u64; 4]) -> Step {
    let s = 3;
    match rng.below(10) {
        0..=3 => Step::Append {
            stream: s,
            token: tok[s],
            records: rng.range(1, 3) as usize,
            size: rng.range(20, 120) as usize,
            match_seq: MatchSeq::No,
        },
        4 => Step::Seal {
            stream: s,
            token: tok[s],
        },
        5 => Step::Seal {
            stream: s,
            token: tok[s].saturating_sub(1).max(1),
        },
        6 => Step::Delete {
            stream: s,
            token: tok[s],
        },
        7 => Step::Append {
            stream: s,
            token: tok[s],
            records: 1,
            size: 30,
            match_seq: MatchSeq::No,
        },
        _ => {
            tok[s] += 1;
            Step::Fence {
                stream: s,
                token: tok[s],
            }
        }
    }
}
