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
        let n = names.clone();
        let clients = args.clients;
        (conns, _) = on_each(conns, move |c, mut conn| {
            let n = n.clone();
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
    }

    let mut setup_logs = Vec::new();
    let mut contents = Vec::new();
    if args.workload == Workload::Read {
        let fill = fill_args(args);
        let (back, logs) = fill_streams(conns, &fill, names.clone()).await?;
        let logs: Vec<ClientLog> = logs.into_iter().map(|(log, _)| log).collect();
        conns = back;
        let mut failures = Vec::new();
        let exp = ledger::expectations(streams, &logs, &mut failures);
        if !failures.is_empty() {
            return Err(BenchError::target(failures.join("; ")));
        }
        contents = exp
            .iter()
            .map(|e| e.by_seq.values().copied().collect())
            .collect();
        setup_logs = logs;
    }

    // tails[s] are stream s's live tails.
    let mut tails: Vec<Vec<super::fencelog::Tail>> = Vec::new();
    if args.workload == Workload::Tail {
        if streams * args.tails_per_stream > TAILS_MAX {
            return Err(BenchError::args(format!(
                "--workload tail opens --tails-per-stream tails per stream: at most {TAILS_MAX} in all"
            )));
        }
        let endpoint = backend.tail_endpoint()?;
        for name in names.iter() {
            let mut on_stream = Vec::with_capacity(args.tails_per_stream);
            for _ in 0..args.tails_per_stream {
                on_stream.push(super::fencelog::Tail::start(&endpoint, name).await?);
            }
            tails.push(on_stream);
        }
    }

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
        let results = logs
            .into_iter()
            .map(|(log, hist)| {
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
            })
            .collect();
        (conns, results)
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

    let mut totals = Totals {
        elapsed,
        cpu_s,
        ..Totals::default()
    };
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

    let record_bytes = args.record_bytes;
    let next_seq_before = (args.workload == Workload::Reject).then_some(0);
    let with_token = matches!(args.workload, Workload::Reject | Workload::Mixed);
    let expected = Arc::new(expected);
    let n = names.clone();
    let clients = args.clients;
    let checks = {
        let expected = expected.clone();
        on_each(conns, move |c, mut conn| {
            let (n, expected) = (n.clone(), expected.clone());
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
                            records +=
                                ledger::check(&n[s], &dump, &expected[s], &rules, &mut failures);
                            streams += 1;
                        }
                        Err(e) => return (conn, Err(e)),
                    }
                }
                (conn, Ok((streams, records, failures)))
            }
        })
        .await
    };
    let (_, checks) = checks?;
    let mut v = super::Verification::default();
    for (streams, records, mut f) in checks {
        v.streams_checked += streams;
        v.records_checked += records;
        failures.append(&mut f);
    }
    v.unknown_outcomes = logs.iter().map(|l| l.unknown.len() as u64).sum();
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
    Ok(report)
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
                        client: c as u32,
                        counter,
                        index: 0,
                    };
                    let records = batch_of(id, n, record_bytes);
                    let t0 = Instant::now();
                    let result = conn.append(&names[s], OWNER_TOKEN, &records).await;
                    stats::record_us(&mut hist, t0.elapsed());
                    match result {
                        Ok(Outcome::Appended { first_seq }) => log.acked.push(Acked {
                            stream: s as u32,
                            first_seq,
                            id,
                            count: n as u16,
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
                    index: id.index + i as u16,
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
    let mut totals = Totals::default();
    let mut hist = stats::histogram();
    let mut log = ClientLog::default();
    let stale_client = match args.workload {
        Workload::Reject => true,
        Workload::Mixed => c % 2 == 1,
        _ => false,
    };
    let keep_ack_time = args.workload == Workload::Tail;
    // Open loop: this client's share of the rate, staggered so clients do
    // not fire in lockstep.
    let interval = args
        .rate
        .map(|r| Duration::from_secs_f64(args.clients as f64 / r));
    let offset = interval.map(|i| i.mul_f64(c as f64 / args.clients as f64));
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15 ^ (c as u64 + 1));
    let mut k: u64 = 0;
    loop {
        let now = Instant::now();
        let t0 = match (interval, offset) {
            (Some(i), Some(o)) => {
                let intended = ctx.started + o + i.mul_f64(k as f64);
                if intended >= ctx.deadline {
                    break;
                }
                if intended > now {
                    tokio::time::sleep_until(intended.into()).await;
                }
                intended
            }
            _ => now,
        };
        if now >= ctx.deadline {
            break;
        }
        let s = (c + k as usize * args.clients) % streams;
        let name = &ctx.names[s];
        let id = BodyId {
            client: c as u32,
            counter: k,
            index: 0,
        };
        let result: Result<(), BenchError> = match args.workload {
            Workload::Healthz => conn.healthz().await,
            Workload::Read => {
                let have = ctx.contents[s].len() as u64;
                let start = rng.next() % have.max(1);
                match conn.read(name, start, args.batch).await {
                    Ok(records) => {
                        for (seq, got) in &records {
                            let want = ctx.contents[s].get(*seq as usize);
                            if want.map(|w| body::encode(*w, args.record_bytes))
                                != Some(got.clone())
                            {
                                log.failures.push(format!(
                                    "{name}: read of seq {seq} returned other bytes"
                                ));
                            }
                        }
                        totals.records += records.len() as u64;
                        ctx.live.add(&ctx.live.records, records.len() as u64);
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
            _ => {
                let token = if stale_client {
                    OWNER_TOKEN - 1 - (k % 1000)
                } else {
                    OWNER_TOKEN
                };
                let records = batch_of(id, args.batch, args.record_bytes);
                match conn.append(name, token, &records).await {
                    Ok(Outcome::Appended { first_seq }) => {
                        if stale_client {
                            log.failures.push(format!(
                                "{name}: append with stale token {token} was accepted at seq {first_seq}"
                            ));
                        }
                        log.acked.push(Acked {
                            stream: s as u32,
                            first_seq,
                            id,
                            count: args.batch as u16,
                            at: keep_ack_time.then(Instant::now),
                        });
                        totals.appends += 1;
                        totals.records += args.batch as u64;
                        ctx.live.add(&ctx.live.records, args.batch as u64);
                        Ok(())
                    }
                    Ok(Outcome::Stale) => {
                        if !stale_client {
                            log.failures.push(format!(
                                "{name}: the owner's token {token} was rejected as stale"
                            ));
                        }
                        totals.rejections += 1;
                        ctx.live.add(&ctx.live.rejections, 1);
                        Ok(())
                    }
                    Err(e) => {
                        log.unknown.push(Unknown {
                            stream: s as u32,
                            id,
                            count: args.batch as u16,
                        });
                        Err(e)
                    }
                }
            }
        };
        stats::record_us(&mut hist, t0.elapsed());
        totals.requests += 1;
        ctx.live.add(&ctx.live.requests, 1);
        if let Err(e) = result {
            totals.errors += 1;
            ctx.live.add(&ctx.live.errors, 1);
            if log.failures.len() < FAILURES_LISTED_MAX {
                log.failures.push(format!("client {c}: {e}"));
            }
            // A failed request usually means a dead connection: one fresh
            // try, and the client stops if even that fails.
            match backend.connect().await {
                Ok(fresh) => conn = fresh,
                Err(_) => break,
            }
        }
        k += 1;
    }
    (conn, ClientResult { totals, hist, log })
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
