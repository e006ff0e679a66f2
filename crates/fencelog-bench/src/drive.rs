//! One run against any backend: connect, set up, load, verify.

use super::body::{self, BodyId};
use super::ledger::{self, Acked, ClientLog, Rules, Unknown};
use super::stats::{self, Live, Report, Totals};
use super::{Backend, BenchArgs, BenchError, Conn, Outcome, Workload};
use bytes::Bytes;
use hdrhistogram::Histogram;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The token the rightful owner holds for every stream during a run.
/// Stale requests present one below it.
pub const OWNER_TOKEN: u64 = 1_000_000;
/// Failures listed in a report; more are counted, not listed.
const FAILURES_LISTED_MAX: usize = 20;
/// How long a live tail may lag behind the last acknowledgement before the
/// records it has not shown count as missed.
const TAIL_DRAIN_MAX: Duration = Duration::from_secs(5);
/// Records per append when filling streams for `read`.
const FILL_BATCH_MAX: usize = 1000;
/// Live tails are one connection each; keep their number sane.
pub(crate) const TAILS_MAX: usize = 10_000;

struct Ctx {
    args: BenchArgs,
    names: Vec<String>,
    live: Arc<Live>,
    started: Instant,
    deadline: Instant,
    /// `read`: what every seq of every stream holds.
    contents: Vec<Vec<BodyId>>,
}

struct ClientResult {
    totals: Totals,
    hist: Histogram<u64>,
    log: ClientLog,
}

/// Tiny deterministic generator for read positions; quality is irrelevant.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

#[allow(
    clippy::cast_possible_truncation,
    reason = "an id wants the clock's fast-moving low bits only"
)]
fn run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}", (nanos as u64) ^ ((std::process::id() as u64) << 40))
}

/// Runs `f` once per connection, concurrently, and gives the connections back.
async fn on_each<C, T, F, Fut>(conns: Vec<C>, f: F) -> Result<(Vec<C>, Vec<T>), BenchError>
where
    C: Conn,
    T: Send + 'static,
    F: Fn(usize, C) -> Fut,
    Fut: Future<Output = (C, Result<T, BenchError>)> + Send + 'static,
{
    let tasks: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(i, c)| tokio::spawn(f(i, c)))
        .collect();
    let mut back = Vec::with_capacity(tasks.len());
    let mut out = Vec::with_capacity(tasks.len());
    let mut first_err = None;
    for t in tasks {
        let (c, r) = t
            .await
            .map_err(|e| BenchError::target(format!("client task failed: {e}")))?;
        back.push(c);
        match r {
            Ok(v) => out.push(v),
            Err(e) => first_err = first_err.or(Some(e)),
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok((back, out)),
    }
}

/// Streams client `c` of `clients` handles when streams are divided up.
fn share(c: usize, clients: usize, streams: usize) -> impl Iterator<Item = usize> {
    (c..streams).step_by(clients)
}

pub async fn drive<B: Backend>(backend: B, args: &BenchArgs) -> Result<Report, BenchError> {
    if !backend.supports(args.workload) {
        return Err(BenchError::args(format!(
            "--workload {:?} is not available for {}",
            args.workload,
            backend.name()
        )));
    }
    let streams = args.stream_count();
    let id = run_id();
    let names: Vec<String> = (0..streams).map(|i| format!("bench-{id}-{i}")).collect();
    let names = Arc::new(names);
    let mut conns = Vec::with_capacity(args.clients);
    for _ in 0..args.clients {
        conns.push(backend.connect().await?);
    }

    // Fence every stream at the owner's token first, so stale requests are
    // stale from their first attempt and every stream exists.
    if args.workload != Workload::Fill {
        conns = fence_all(conns, names.clone()).await?;
    }
    let (conns, setup_logs, contents) = if args.workload == Workload::Read {
        fill_for_read(conns, args, names.clone()).await?
    } else {
        (conns, Vec::new(), Vec::new())
    };
    let tails = if args.workload == Workload::Tail {
        open_tails(&backend, &names, args.tails_per_stream).await?
    } else {
        Vec::new()
    };

    let (conns, results, totals) = load(backend, conns, args, &names, contents).await?;
    let (totals, hist, mut logs) = sum_up(results, totals);
    logs.extend(setup_logs);
    let mut report = Report::header(args)(totals, hist);

    let mut failures = Vec::new();
    for log in &mut logs {
        failures.append(&mut log.failures);
    }
    let expected = ledger::expectations(streams, &logs, &mut failures);

    if !tails.is_empty() {
        let acked_records: u64 = logs
            .iter()
            .flat_map(|l| &l.acked)
            .map(|a| a.count as u64)
            .sum();
        report.visibility =
            Some(tail_visibility(tails, &logs, acked_records, &mut failures).await?);
    }

    let mut v = check_streams(conns, names, expected, args, &mut failures).await?;
    v.unknown_outcomes = logs.iter().map(|l| l.unknown.len() as u64).sum();
    conclude(&mut report, args, v, failures);
    Ok(report)
}

/// Fences every stream at the owner's token, streams divided among the
/// connections.
async fn fence_all<C: Conn>(conns: Vec<C>, names: Arc<Vec<String>>) -> Result<Vec<C>, BenchError> {
    let clients = conns.len();
    let (conns, _) = on_each(conns, move |c, mut conn| {
        let n = names.clone();
        async move {
            let mut r = Ok(());
            for s in share(c, clients, n.len()) {
                r = conn.fence(&n[s], OWNER_TOKEN).await;
                if r.is_err() {
                    break;
                }
            }
            (conn, r)
        }
    })
    .await?;
    Ok(conns)
}

/// What a `read` run reads: the fill's acknowledgements, and what every
/// seq of every stream holds.
type Filled<C> = (Vec<C>, Vec<ClientLog>, Vec<Vec<BodyId>>);

/// For `read`: fills every stream, and checks the fill's acknowledgements
/// before the run relies on them.
async fn fill_for_read<C: Conn>(
    conns: Vec<C>,
    args: &BenchArgs,
    names: Arc<Vec<String>>,
) -> Result<Filled<C>, BenchError> {
    let streams = names.len();
    let fill = fill_args(args);
    let (conns, logs) = fill_streams(conns, &fill, names).await?;
    let logs: Vec<ClientLog> = logs.into_iter().map(|(log, _)| log).collect();
    let mut failures = Vec::new();
    let exp = ledger::expectations(streams, &logs, &mut failures);
    if !failures.is_empty() {
        return Err(BenchError::target(failures.join("; ")));
    }
    let contents = exp
        .iter()
        .map(|e| e.by_seq.values().copied().collect())
        .collect();
    Ok((conns, logs, contents))
}

/// For `tail`: `per_stream` live tails on every stream; `tails[s]` are
/// stream s's.
async fn open_tails<B: Backend>(
    backend: &B,
    names: &[String],
    per_stream: usize,
) -> Result<Vec<Vec<super::fencelog::Tail>>, BenchError> {
    if names.len() * per_stream > TAILS_MAX {
        return Err(BenchError::args(format!(
            "--workload tail opens --tails-per-stream tails per stream: at most {TAILS_MAX} in all"
        )));
    }
    let endpoint = backend.tail_endpoint()?;
    let mut tails = Vec::new();
    for name in names {
        let mut on_stream = Vec::with_capacity(per_stream);
        for _ in 0..per_stream {
            on_stream.push(super::fencelog::Tail::start(&endpoint, name).await?);
        }
        tails.push(on_stream);
    }
    Ok(tails)
}

/// The timed part: every client's loop (or, for `fill`, the fill itself)
/// with the progress line. Gives back the connections, each client's
/// result, and totals holding the time and CPU the part took.
async fn load<B: Backend>(
    backend: B,
    conns: Vec<B::Conn>,
    args: &BenchArgs,
    names: &Arc<Vec<String>>,
    contents: Vec<Vec<BodyId>>,
) -> Result<(Vec<B::Conn>, Vec<ClientResult>, Totals), BenchError> {
    let started = Instant::now();
    let ctx = Arc::new(Ctx {
        args: args.clone(),
        names: names.to_vec(),
        live: Arc::new(Live::default()),
        started,
        deadline: started + args.duration_limit(),
        contents,
    });
    let progress_until = if args.workload == Workload::Fill {
        started + Duration::from_secs(24 * 3600)
    } else {
        ctx.deadline
    };
    let progress = stats::spawn_progress(ctx.live.clone(), started, progress_until);
    let backend = Arc::new(backend);
    let cpu_before = stats::process_cpu_s();
    let (conns, results) = if args.workload == Workload::Fill {
        let (conns, logs) = fill_streams(conns, args, names.clone()).await?;
        (conns, logs.into_iter().map(fill_result).collect())
    } else {
        let b = backend.clone();
        let cx = ctx.clone();
        on_each(conns, move |c, conn| {
            let (b, cx) = (b.clone(), cx.clone());
            async move {
                let (conn, r) = client_loop(c, conn, &*b, &cx).await;
                (conn, Ok(r))
            }
        })
        .await?
    };
    let elapsed = started.elapsed();
    let cpu_s = stats::process_cpu_s().zip(cpu_before).map(|(a, b)| a - b);
    if let Some(p) = progress {
        p.abort();
    }
    let totals = Totals {
        elapsed,
        cpu_s,
        ..Totals::default()
    };
    Ok((conns, results, totals))
}

/// A `fill` client's log and latencies as a client's result.
fn fill_result((log, hist): (ClientLog, Histogram<u64>)) -> ClientResult {
    let records: u64 = log.acked.iter().map(|a| a.count as u64).sum();
    ClientResult {
        totals: Totals {
            requests: log.acked.len() as u64,
            appends: log.acked.len() as u64,
            records,
            ..Totals::default()
        },
        hist,
        log,
    }
}

/// The clients' counts added to `totals`, their latencies in one
/// histogram, and their logs.
fn sum_up(
    results: Vec<ClientResult>,
    mut totals: Totals,
) -> (Totals, Histogram<u64>, Vec<ClientLog>) {
    let mut hist = stats::histogram();
    let mut logs = Vec::with_capacity(results.len());
    for r in results {
        totals.requests += r.totals.requests;
        totals.appends += r.totals.appends;
        totals.records += r.totals.records;
        totals.rejections += r.totals.rejections;
        totals.errors += r.totals.errors;
        hist.add(&r.hist).expect("histograms share their bounds");
        logs.push(r.log);
    }
    (totals, hist, logs)
}

/// Reads every stream back and checks it against `expected`, streams
/// divided among the connections; the differences go to `failures`.
async fn check_streams<C: Conn>(
    conns: Vec<C>,
    names: Arc<Vec<String>>,
    expected: Vec<ledger::Expected>,
    args: &BenchArgs,
    failures: &mut Vec<String>,
) -> Result<super::Verification, BenchError> {
    let record_bytes = args.record_bytes;
    let next_seq_before = (args.workload == Workload::Reject).then_some(0);
    let with_token = matches!(args.workload, Workload::Reject | Workload::Mixed);
    let expected = Arc::new(expected);
    let clients = args.clients;
    let (_, checks) = on_each(conns, move |c, mut conn| {
        let (n, expected) = (names.clone(), expected.clone());
        async move {
            let rules = Rules {
                token: OWNER_TOKEN,
                record_bytes,
                next_seq_before,
            };
            let mut failures = Vec::new();
            let mut records = 0u64;
            let mut streams = 0u64;
            for s in share(c, clients, n.len()) {
                match conn.dump(&n[s], with_token).await {
                    Ok(dump) => {
                        records += ledger::check(&n[s], &dump, &expected[s], &rules, &mut failures);
                        streams += 1;
                    }
                    Err(e) => return (conn, Err(e)),
                }
            }
            (conn, Ok((streams, records, failures)))
        }
    })
    .await?;
    let mut v = super::Verification::default();
    for (streams, records, mut f) in checks {
        v.streams_checked += streams;
        v.records_checked += records;
        failures.append(&mut f);
    }
    Ok(v)
}

/// The run's own expectations (acknowledged appends, attempted stale
/// ones), the failures listed up to [`FAILURES_LISTED_MAX`], and the
/// verdict, into `report`.
fn conclude(
    report: &mut Report,
    args: &BenchArgs,
    mut v: super::Verification,
    mut failures: Vec<String>,
) {
    if report.appends == 0
        && matches!(
            args.workload,
            Workload::Append | Workload::Mixed | Workload::Tail
        )
    {
        failures.push("no append was acknowledged".into());
    }
    if report.rejections == 0 && matches!(args.workload, Workload::Reject) {
        failures.push("no stale append was attempted".into());
    }
    let total_failures = failures.len();
    failures.truncate(FAILURES_LISTED_MAX);
    if total_failures > FAILURES_LISTED_MAX {
        failures.push(format!(
            "... and {} more",
            total_failures - FAILURES_LISTED_MAX
        ));
    }
    v.passed = failures.is_empty();
    v.failures = failures;
    report.verification = v;
}

/// Arguments for filling streams before a `read` run.
fn fill_args(args: &BenchArgs) -> BenchArgs {
    BenchArgs {
        batch: args.fill_records.min(FILL_BATCH_MAX),
        ..args.clone()
    }
}

/// Appends `fill_records` records to each stream, streams divided among the
/// clients. Bounded by the number of streams and records, not by time.
async fn fill_streams<C: Conn>(
    conns: Vec<C>,
    args: &BenchArgs,
    names: Arc<Vec<String>>,
) -> Result<(Vec<C>, Vec<(ClientLog, Histogram<u64>)>), BenchError> {
    let clients = conns.len();
    let (per_stream, batch, record_bytes) = (args.fill_records, args.batch, args.record_bytes);
    on_each(conns, move |c, mut conn| {
        let names = names.clone();
        async move {
            let mut log = ClientLog::default();
            let mut hist = stats::histogram();
            let mut counter = 0u64;
            for s in share(c, clients, names.len()) {
                let mut left = per_stream;
                while left > 0 {
                    let n = left.min(batch);
                    let id = BodyId {
                        client: ledger::client_id(c),
                        counter,
                        index: 0,
                    };
                    let records = batch_of(id, n, record_bytes);
                    let t0 = Instant::now();
                    let result = conn.append(&names[s], OWNER_TOKEN, &records).await;
                    stats::record_us(&mut hist, t0.elapsed());
                    match result {
                        Ok(Outcome::Appended { first_seq }) => log.acked.push(Acked {
                            stream: ledger::stream_index(s),
                            first_seq,
                            id,
                            count: ledger::batch_u16(n),
                            at: None,
                        }),
                        Ok(Outcome::Stale) => {
                            return (
                                conn,
                                Err(BenchError::target(format!(
                                    "{}: the owner's token was rejected while filling",
                                    names[s]
                                ))),
                            )
                        }
                        Err(e) => return (conn, Err(e)),
                    }
                    counter += 1;
                    left -= n;
                }
            }
            (conn, Ok((log, hist)))
        }
    })
    .await
}

fn batch_of(id: BodyId, n: usize, record_bytes: usize) -> Vec<Bytes> {
    (0..n)
        .map(|i| {
            body::encode(
                BodyId {
                    index: id.index + ledger::batch_u16(i),
                    ..id
                },
                record_bytes,
            )
        })
        .collect()
}

async fn client_loop<B: Backend>(
    c: usize,
    mut conn: B::Conn,
    backend: &B,
    ctx: &Ctx,
) -> (B::Conn, ClientResult) {
    let args = &ctx.args;
    let streams = ctx.names.len();
    let mut out = ClientResult {
        totals: Totals::default(),
        hist: stats::histogram(),
        log: ClientLog::default(),
    };
    let stale_client = match args.workload {
        Workload::Reject => true,
        Workload::Mixed => c % 2 == 1,
        _ => false,
    };
    // Open loop: this client's share of the rate, staggered so clients do
    // not fire in lockstep.
    let schedule = args.rate.map(|r| {
        let interval = Duration::from_secs_f64(args.clients as f64 / r);
        (interval, interval.mul_f64(c as f64 / args.clients as f64))
    });
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15 ^ (c as u64 + 1));
    let mut k: u64 = 0;
    // Request k goes to stream (c + k * clients) % streams.
    let mut s = c % streams;
    loop {
        let now = Instant::now();
        let Some(t0) = pace(ctx, schedule, k, now).await else {
            break;
        };
        if now >= ctx.deadline {
            break;
        }
        let result: Result<(), BenchError> = match args.workload {
            Workload::Healthz => conn.healthz().await,
            Workload::Read => {
                let have = ctx.contents[s].len() as u64;
                let start = rng.next() % have.max(1);
                read_once(&mut conn, ctx, s, start, &mut out).await
            }
            _ => {
                let token = if stale_client {
                    OWNER_TOKEN - 1 - (k % 1000)
                } else {
                    OWNER_TOKEN
                };
                let id = BodyId {
                    client: ledger::client_id(c),
                    counter: k,
                    index: 0,
                };
                append_once(&mut conn, ctx, s, id, token, stale_client, &mut out).await
            }
        };
        stats::record_us(&mut out.hist, t0.elapsed());
        out.totals.requests += 1;
        ctx.live.add(&ctx.live.requests, 1);
        if let Err(e) = result {
            out.totals.errors += 1;
            ctx.live.add(&ctx.live.errors, 1);
            if out.log.failures.len() < FAILURES_LISTED_MAX {
                out.log.failures.push(format!("client {c}: {e}"));
            }
            // A failed request usually means a dead connection: one fresh
            // try, and the client stops if even that fails.
            match backend.connect().await {
                Ok(fresh) => conn = fresh,
                Err(_) => break,
            }
        }
        k += 1;
        s = (s + args.clients) % streams;
    }
    (conn, out)
}

/// When request `k` starts: `now` in a closed loop; in an open loop (an
/// interval and this client's offset) its intended time, waited for, or
/// `None` once that is past the deadline.
async fn pace(
    ctx: &Ctx,
    schedule: Option<(Duration, Duration)>,
    k: u64,
    now: Instant,
) -> Option<Instant> {
    let Some((interval, offset)) = schedule else {
        return Some(now);
    };
    let intended = ctx.started + offset + interval.mul_f64(k as f64);
    if intended >= ctx.deadline {
        return None;
    }
    if intended > now {
        tokio::time::sleep_until(intended.into()).await;
    }
    Some(intended)
}

/// `read`: one page of stream `s` from `start`, every record checked
/// against what the fill wrote there.
async fn read_once<C: Conn>(
    conn: &mut C,
    ctx: &Ctx,
    s: usize,
    start: u64,
    out: &mut ClientResult,
) -> Result<(), BenchError> {
    let name = &ctx.names[s];
    let records = conn.read(name, start, ctx.args.batch).await?;
    for (seq, got) in &records {
        let want = usize::try_from(*seq)
            .ok()
            .and_then(|i| ctx.contents[s].get(i));
        if want.map(|w| body::encode(*w, ctx.args.record_bytes)) != Some(got.clone()) {
            out.log
                .failures
                .push(format!("{name}: read of seq {seq} returned other bytes"));
        }
    }
    out.totals.records += records.len() as u64;
    ctx.live.add(&ctx.live.records, records.len() as u64);
    Ok(())
}

/// One append of a batch written by `id` to stream `s` with `token`: a
/// stale client's must be refused, the owner's accepted.
async fn append_once<C: Conn>(
    conn: &mut C,
    ctx: &Ctx,
    s: usize,
    id: BodyId,
    token: u64,
    stale_client: bool,
    out: &mut ClientResult,
) -> Result<(), BenchError> {
    let args = &ctx.args;
    let name = &ctx.names[s];
    let records = batch_of(id, args.batch, args.record_bytes);
    match conn.append(name, token, &records).await {
        Ok(Outcome::Appended { first_seq }) => {
            if stale_client {
                out.log.failures.push(format!(
                    "{name}: append with stale token {token} was accepted at seq {first_seq}"
                ));
            }
            out.log.acked.push(Acked {
                stream: ledger::stream_index(s),
                first_seq,
                id,
                count: ledger::batch_u16(args.batch),
                at: (args.workload == Workload::Tail).then(Instant::now),
            });
            out.totals.appends += 1;
            out.totals.records += args.batch as u64;
            ctx.live.add(&ctx.live.records, args.batch as u64);
            Ok(())
        }
        Ok(Outcome::Stale) => {
            if !stale_client {
                out.log.failures.push(format!(
                    "{name}: the owner's token {token} was rejected as stale"
                ));
            }
            out.totals.rejections += 1;
            ctx.live.add(&ctx.live.rejections, 1);
            Ok(())
        }
        Err(e) => {
            out.log.unknown.push(Unknown {
                stream: ledger::stream_index(s),
                id,
                count: ledger::batch_u16(args.batch),
            });
            Err(e)
        }
    }
}

/// Acknowledgement to arrival at the LAST of its stream's tails, for every
/// acknowledged record: with one tail per stream, the delivery delay; with
/// many, the fan-out delay ("delivered to all").
async fn tail_visibility(
    tails: Vec<Vec<super::fencelog::Tail>>,
    logs: &[ClientLog],
    acked_records: u64,
    failures: &mut Vec<String>,
) -> Result<super::LatencySummary, BenchError> {
    let per_stream = tails.first().map_or(0, Vec::len) as u64;
    let drain_until = Instant::now() + TAIL_DRAIN_MAX;
    while Instant::now() < drain_until {
        let seen: u64 = tails.iter().flatten().map(|t| t.seen()).sum();
        if seen >= acked_records * per_stream {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // seen_at[s][t]: (seq, arrival) at tail t of stream s, by seq.
    let mut seen_at = Vec::with_capacity(tails.len());
    for on_stream in tails {
        let mut got_all = Vec::with_capacity(on_stream.len());
        for t in on_stream {
            let mut got = t.finish().await?;
            got.sort_by_key(|g| g.0);
            got_all.push(got);
        }
        seen_at.push(got_all);
    }
    let mut hist = stats::histogram();
    let mut missed = 0u64;
    for a in logs.iter().flat_map(|l| &l.acked) {
        let Some(acked_at) = a.at else { continue };
        for i in 0..a.count as u64 {
            match last_arrival(&seen_at[a.stream as usize], a.first_seq + i) {
                // A tail may see a record before its producer reads the
                // acknowledgement; that is zero delay, not negative.
                Some(at) => stats::record_us(&mut hist, at.saturating_duration_since(acked_at)),
                None => missed += 1,
            }
        }
    }
    if missed > 0 {
        failures.push(format!(
            "live tails never showed {missed} acknowledged records within {TAIL_DRAIN_MAX:?}"
        ));
    }
    Ok(super::LatencySummary::of(&hist))
}

/// When the last of `tails` received `seq`, or None if one never did.
fn last_arrival(tails: &[Vec<(u64, Instant)>], seq: u64) -> Option<Instant> {
    let mut last = None;
    for got in tails {
        let p = got.binary_search_by_key(&seq, |g| g.0).ok()?;
        last = last.max(Some(got[p].1));
    }
    last
}

#[cfg(test)]
mod tests {
    use super::last_arrival;
    use std::time::{Duration, Instant};

    #[test]
    fn a_record_arrives_when_its_last_tail_gets_it_and_never_if_one_misses_it() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let tails = vec![vec![(0, at(1)), (1, at(5))], vec![(0, at(3)), (1, at(2))]];
        assert_eq!(last_arrival(&tails, 0), Some(at(3)));
        assert_eq!(last_arrival(&tails, 1), Some(at(5)));
        let missing = vec![vec![(0, at(1))], vec![(1, at(2))]];
        assert_eq!(last_arrival(&missing, 0), None);
        assert_eq!(last_arrival(&[], 0), None);
    }
}
