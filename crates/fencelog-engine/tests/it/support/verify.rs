//! The invariant checker: reads everything back through the public API and
//! compares it with what every request was told. After any crash, no
//! stream may have forgotten its highest token, its seal or its tombstone;
//! no acknowledged record above a trim point may be lost; nothing below a
//! trim point may be served; and everything served is exactly what some
//! non-refused append sent, in whole batches, in order.

use super::{parse_body, Attempt, Kind, Model, Outcome};
use fencelog_engine::{Engine, ReadError, Record, StreamState};
use std::collections::{BTreeMap, HashMap};

/// How strictly [`verify`] compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The engine that served the script: it must show exactly what it
    /// acknowledged (no unsynced or failed group is visible). `reads_may_fail`
    /// when the disk under it is gone.
    Live { reads_may_fail: bool },
    /// After recovery: every acknowledged record, plus any subset of whole
    /// unknown-outcome batches, nothing else.
    Recovered,
    /// After damage at rest that recovery may legally cut (a torn tail):
    /// what is there must be right, but acked records may be missing from
    /// the end of the log; the caller bounds how many.
    Prefix,
}

/// A stream's durable content, for comparing two recoveries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamDump {
    pub first_seq: u64,
    pub next_seq: u64,
    pub highest_token: u64,
    pub sealed: bool,
    pub deleted: bool,
    /// Every record from `first_seq` on, headers included.
    pub records: Vec<Record>,
}

impl StreamDump {
    /// The record at `seq`, if readable.
    pub fn at(&self, seq: u64) -> Option<&Record> {
        self.records.get(seq.checked_sub(self.first_seq)? as usize)
    }
}

pub type Dump = BTreeMap<String, StreamDump>;

/// Records in the dump, over all streams.
pub fn dump_records(d: &Dump) -> u64 {
    d.values().map(|v| v.records.len() as u64).sum()
}

/// What the attempts on one stream prove, and allow.
#[derive(Default)]
struct Facts {
    max_acked_token: u64,
    max_tried_token: u64,
    /// The highest first_seq an acknowledged trim or delete answered.
    trim_floor: u64,
    /// A trim or delete may have moved the trim point further.
    trim_unknown: bool,
    /// Retention may have trimmed (a config that may have applied).
    retention: bool,
    /// The last acknowledged delete's position and token.
    last_delete: Option<(usize, u64)>,
    /// A later write (acked or unknown) with a higher token may have
    /// recreated the stream after that delete...
    recreated: bool,
    /// ...or one acknowledged did.
    recreated_acked: bool,
    /// A later delete may have applied after the last acked one.
    delete_maybe_after: bool,
    /// The stream must be sealed: an acked seal with no delete after it
    /// that may have applied.
    must_be_sealed: bool,
    /// Some seal may have applied since the last acked delete.
    seal_possible: bool,
    /// Sealed by the acknowledged writes alone: what a live engine shows
    /// (it publishes nothing it did not acknowledge).
    sealed_by_acks: bool,
    any_delete: bool,
    any_acked: bool,
}

fn facts(model: &Model, ids: &[usize]) -> Facts {
    let mut f = Facts::default();
    for &id in ids {
        let a: &Attempt = &model.attempts[id];
        if a.acked() {
            f.any_acked = true;
            // What the answer proved: a seal of an already sealed stream
            // succeeds without writing, so its own token may not be the
            // stream's.
            let proved = match (a.kind, &a.outcome) {
                (Kind::Config, _) => 0,
                (_, Outcome::Done { highest_token, .. }) => *highest_token,
                _ => a.token,
            };
            f.max_acked_token = f.max_acked_token.max(proved);
        }
        if a.maybe() && a.kind != Kind::Config {
            f.max_tried_token = f.max_tried_token.max(a.token);
        }
        match (a.kind, &a.outcome) {
            (Kind::Trim | Kind::Delete, Outcome::Done { first_seq, .. }) => {
                f.trim_floor = f.trim_floor.max(*first_seq)
            }
            (Kind::Trim | Kind::Delete, Outcome::Unknown) => f.trim_unknown = true,
            (Kind::Config, o) if *o != Outcome::Rejected => f.retention = true,
            _ => {}
        }
        if a.kind == Kind::Delete && a.maybe() {
            f.any_delete = true;
            if a.acked() {
                f.last_delete = Some((id, a.token));
                f.recreated = false;
                f.recreated_acked = false;
                f.delete_maybe_after = false;
                f.must_be_sealed = false;
                f.seal_possible = false;
            } else {
                f.delete_maybe_after = true;
                f.must_be_sealed = false;
            }
        }
        let recreates = matches!(a.kind, Kind::Append | Kind::Fence)
            && a.maybe()
            && f.last_delete.is_some_and(|(_, t)| a.token > t);
        f.recreated |= recreates;
        f.recreated_acked |= recreates && a.acked();
        match (a.kind, a.acked()) {
            (Kind::Seal, true) => f.sealed_by_acks = true,
            (Kind::Delete, true) => f.sealed_by_acks = false,
            _ => {}
        }
        if a.kind == Kind::Seal && a.maybe() {
            f.seal_possible = true;
            f.must_be_sealed |= a.acked();
        }
    }
    f
}

/// Reads everything back through `Engine::read` and checks the invariants
/// against the model. Returns the content for idempotence comparisons.
pub fn verify(engine: &Engine, model: &Model, mode: Mode) -> Result<Dump, String> {
    let mut dump = Dump::new();
    let mut by_stream: HashMap<&str, Vec<usize>> = HashMap::new();
    let order: Vec<usize> = match model.order.is_empty() {
        true => (0..model.attempts.len()).collect(),
        false => model.order.clone(),
    };
    assert_eq!(
        order.len(),
        model.attempts.len(),
        "an order of every attempt"
    );
    for id in order {
        let a = &model.attempts[id];
        if a.outcome == Outcome::Pending {
            return Err(format!("attempt {id} was never answered"));
        }
        by_stream.entry(&a.stream).or_default().push(id);
    }
    for st in engine.list_streams("", None, usize::MAX) {
        if !by_stream.contains_key(st.stream.as_str()) {
            return Err(format!("stream {} exists but nobody wrote it", st.stream));
        }
    }
    for (name, ids) in &by_stream {
        let f = facts(model, ids);
        let state = match engine.state(name) {
            Ok(s) => s,
            Err(ReadError::NotFound) => {
                if f.any_acked && mode != Mode::Prefix {
                    return Err(format!("stream {name} with acknowledged writes is missing"));
                }
                continue;
            }
            Err(e) => return Err(format!("state({name}): {e}")),
        };
        check_tokens(name, &state, &f, mode)?;
        let d = if state.deleted {
            check_tombstone(engine, name, &state, &f, mode)?
        } else {
            check_live(engine, model, name, ids, &state, &f, mode)?
        };
        if let Some(d) = d {
            dump.insert(name.to_string(), d);
        }
    }
    Ok(dump)
}

fn check_tokens(name: &str, s: &StreamState, f: &Facts, mode: Mode) -> Result<(), String> {
    if mode != Mode::Prefix && s.highest_token < f.max_acked_token {
        return Err(format!(
            "{name}: highest_token {} is below the acknowledged token {}",
            s.highest_token, f.max_acked_token
        ));
    }
    if s.highest_token > f.max_tried_token {
        return Err(format!(
            "{name}: highest_token {} not explained by the requests (max {})",
            s.highest_token, f.max_tried_token
        ));
    }
    if matches!(mode, Mode::Live { .. }) && s.highest_token != f.max_acked_token {
        return Err(format!(
            "{name}: live highest_token {} is not the acknowledged {}",
            s.highest_token, f.max_acked_token
        ));
    }
    Ok(())
}

/// A tombstone: explained by a delete, not undone by a recreation that was
/// acknowledged after it, and nothing readable.
fn check_tombstone(
    engine: &Engine,
    name: &str,
    s: &StreamState,
    f: &Facts,
    mode: Mode,
) -> Result<Option<StreamDump>, String> {
    if !f.any_delete {
        return Err(format!("{name} is a tombstone nobody asked for"));
    }
    if f.recreated_acked && !f.delete_maybe_after && mode != Mode::Prefix {
        return Err(format!(
            "{name}: recreated after its delete, but still a tombstone"
        ));
    }
    if s.first_seq != s.next_seq || s.bytes != 0 || s.sealed {
        return Err(format!("{name}: a tombstone with records or a seal: {s:?}"));
    }
    match engine.read(name, s.first_seq, 1, 1 << 20) {
        Err(ReadError::NotFound) => {}
        other => {
            return Err(format!(
                "{name}: a read of the tombstone answered {other:?}"
            ))
        }
    }
    Ok(Some(StreamDump {
        first_seq: s.first_seq,
        next_seq: s.next_seq,
        highest_token: s.highest_token,
        sealed: false,
        deleted: true,
        records: Vec::new(),
    }))
}

fn check_live(
    engine: &Engine,
    model: &Model,
    name: &str,
    ids: &[usize],
    s: &StreamState,
    f: &Facts,
    mode: Mode,
) -> Result<Option<StreamDump>, String> {
    if let Some((id, _)) = f.last_delete {
        if !f.recreated && mode != Mode::Prefix {
            return Err(format!("{name}: forgot its tombstone (attempt {id} deleted it; nothing higher recreated it)"));
        }
    }
    if f.must_be_sealed && !s.sealed && mode != Mode::Prefix {
        return Err(format!("{name}: forgot its seal"));
    }
    if s.sealed && !f.seal_possible {
        return Err(format!("{name}: sealed, but no seal since its last delete"));
    }
    check_trim_point(engine, name, s, f, mode)?;
    let Some(records) = read_all(engine, name, s, mode)? else {
        return Ok(None);
    };
    let complete = records.last().map_or(s.first_seq, |r| r.seq + 1) == s.next_seq;
    let seen = check_records(model, name, s, &records, mode, complete)?;
    if complete && mode != Mode::Prefix {
        check_acked_present(model, name, ids, s, &seen)?;
    }
    if let Mode::Live { .. } = mode {
        let acked: u64 = ids
            .iter()
            .map(|&i| &model.attempts[i])
            .filter(|a| matches!(a.outcome, Outcome::Acked { .. }))
            .map(|a| a.bodies.len() as u64)
            .sum();
        if s.next_seq != acked || s.sealed != f.sealed_by_acks {
            return Err(format!("{name}: live state {s:?} differs from what was acknowledged ({acked} records, sealed {})", f.sealed_by_acks));
        }
    }
    Ok(Some(StreamDump {
        first_seq: s.first_seq,
        next_seq: s.next_seq,
        highest_token: s.highest_token,
        sealed: s.sealed,
        deleted: false,
        records,
    }))
}

/// Nothing below the trim point is served, and the trim point is where
/// the trims said (a crash never moves it back).
fn check_trim_point(
    engine: &Engine,
    name: &str,
    s: &StreamState,
    f: &Facts,
    mode: Mode,
) -> Result<(), String> {
    if mode != Mode::Prefix && s.first_seq < f.trim_floor.min(s.next_seq) {
        return Err(format!(
            "{name}: first_seq {} is below the acknowledged trim point {}",
            s.first_seq, f.trim_floor
        ));
    }
    if !f.retention && !f.trim_unknown && s.first_seq > f.trim_floor {
        return Err(format!(
            "{name}: first_seq {} is past every trim ({})",
            s.first_seq, f.trim_floor
        ));
    }
    if s.first_seq > 0 {
        match engine.read(name, s.first_seq - 1, 1, 1 << 20) {
            Err(ReadError::OutOfRange { first_seq, .. }) if first_seq == s.first_seq => {}
            other => {
                return Err(format!(
                    "{name}: a read below first_seq {} answered {other:?}",
                    s.first_seq
                ))
            }
        }
    }
    Ok(())
}

/// Every readable record, in pages, through the public read path. `None`
/// when the disk under a live engine is gone and a read failed.
fn read_all(
    engine: &Engine,
    name: &str,
    s: &StreamState,
    mode: Mode,
) -> Result<Option<Vec<fencelog_engine::Record>>, String> {
    let mut records = Vec::new();
    let mut seq = s.first_seq;
    while seq < s.next_seq {
        match engine.read(name, seq, 7, 600) {
            Ok(b) if b.records.is_empty() => {
                return Err(format!("{name}: empty read at {seq} below next_seq"))
            }
            Ok(b) => {
                seq += b.records.len() as u64;
                records.extend(b.records);
            }
            Err(ReadError::Io(_))
                if mode
                    == (Mode::Live {
                        reads_may_fail: true,
                    }) =>
            {
                return Ok(Some(records))
            }
            Err(e) => return Err(format!("{name}: read at {seq} failed: {e}")),
        }
    }
    Ok(Some(records))
}

/// Dense seqs from `first_seq`, whole batches of non-refused appends with
/// exactly the bytes sent (the first may be cut by the trim point), tokens
/// and timestamps never going down. Returns seq → (attempt, record).
fn check_records(
    model: &Model,
    name: &str,
    s: &StreamState,
    records: &[fencelog_engine::Record],
    mode: Mode,
    complete: bool,
) -> Result<HashMap<u64, (usize, usize)>, String> {
    let mut seen = HashMap::new();
    let mut batches = std::collections::HashSet::new();
    let mut expect: Option<(usize, usize)> = None;
    let (mut last_token, mut last_ts) = (0, 0);
    for (i, r) in records.iter().enumerate() {
        if r.seq != s.first_seq + i as u64 {
            return Err(format!("{name}: record {i} has seq {}", r.seq));
        }
        let (sn, id, k) = parse_body(&r.body)
            .ok_or_else(|| format!("{name} seq {}: unrecognisable body {:?}", r.seq, r.body))?;
        let a = model
            .attempts
            .get(id)
            .ok_or_else(|| format!("{name} seq {}: body of unknown attempt {id}", r.seq))?;
        if sn != *name || a.stream != *name || k >= a.bodies.len() || a.bodies[k] != r.body {
            return Err(format!(
                "{name} seq {}: wrong bytes served: {:?}",
                r.seq, r.body
            ));
        }
        if a.headers_of(k) != &r.headers[..] {
            return Err(format!(
                "{name} seq {}: wrong headers served: {:?}, appended {:?}",
                r.seq,
                r.headers,
                a.headers_of(k)
            ));
        }
        match (&a.outcome, mode) {
            (Outcome::Rejected, _) => {
                return Err(format!(
                    "{name} seq {}: attempt {id} was rejected but is in the log",
                    r.seq
                ))
            }
            (Outcome::Unknown, Mode::Live { .. }) => {
                return Err(format!(
                    "{name} seq {}: attempt {id} failed (not acknowledged) but readers see it",
                    r.seq
                ))
            }
            _ => {}
        }
        if r.fencing_token != a.token {
            return Err(format!(
                "{name} seq {}: token {} but attempt {id} used {}",
                r.seq, r.fencing_token, a.token
            ));
        }
        if r.fencing_token < last_token || r.timestamp_ms < last_ts {
            return Err(format!(
                "{name} seq {}: token or timestamp went down",
                r.seq
            ));
        }
        (last_token, last_ts) = (r.fencing_token, r.timestamp_ms);
        match expect {
            Some((eid, ek)) if (eid, ek) != (id, k) => {
                return Err(format!(
                    "{name} seq {}: batch {eid} is torn (wanted record {ek}, found {id}/{k})",
                    r.seq
                ))
            }
            // Only the first readable record may start inside its batch:
            // the trim point cut it.
            None if k != 0 && i != 0 => {
                return Err(format!(
                    "{name} seq {}: batch {id} starts at its record {k}",
                    r.seq
                ))
            }
            _ => {}
        }
        if (k == 0 || i == 0) && !batches.insert(id) {
            return Err(format!("{name}: attempt {id} appears twice"));
        }
        seen.insert(r.seq, (id, k));
        expect = (k + 1 < a.bodies.len()).then_some((id, k + 1));
    }
    if complete && expect.is_some() {
        return Err(format!("{name}: the last batch is torn"));
    }
    Ok(seen)
}

/// Every acknowledged append is at the seq it was told, as far as it lies
/// above the trim point.
fn check_acked_present(
    model: &Model,
    name: &str,
    ids: &[usize],
    s: &StreamState,
    seen: &HashMap<u64, (usize, usize)>,
) -> Result<(), String> {
    for &id in ids {
        let a = &model.attempts[id];
        let Outcome::Acked { first_seq } = a.outcome else {
            continue;
        };
        for k in 0..a.bodies.len() {
            let seq = first_seq + k as u64;
            if seq < s.first_seq {
                continue;
            }
            if seen.get(&seq) != Some(&(id, k)) {
                return Err(format!(
                    "{name}: acknowledged attempt {id} record {k} at seq {seq} is {}",
                    match seen.get(&seq) {
                        Some(other) => format!("{other:?} instead"),
                        None => "missing".into(),
                    }
                ));
            }
        }
    }
    Ok(())
}
