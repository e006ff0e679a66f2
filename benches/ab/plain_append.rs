//! Plain appends, the same program built against two revisions of
//! fencelog-engine (`plain_append_ab.sh` builds it twice): does a change
//! slow the path every producer without a producer id takes? It uses only
//! the API every revision since format 2 has (`Engine::open`, `append`,
//! `shutdown`). Modes:
//!   tput DIR APPENDERS APPENDS   -> records/s and process CPU µs per append
//!   count DIR APPENDS            -> one appender, awaited appends, for
//!                                   callgrind (run at two sizes; the
//!                                   difference is the per-append cost)
use bytes::Bytes;
use fencelog_engine::Engine;
use std::time::Instant;

fn cpu_us() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap();
    let rest = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // USER_HZ is 100 on Linux.
    ticks * 1e6 / 100.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let body = Bytes::from(vec![b'x'; 100]);
    match args[1].as_str() {
        "tput" => {
            let dir = tempfile::tempdir_in(&args[2]).unwrap();
            let appenders: usize = args[3].parse().unwrap();
            let appends: usize = args[4].parse().unwrap();
            let engine = Engine::open(dir.path()).unwrap();
            rt.block_on(async {
                // Create the streams first: the measured appends are all
                // to streams that exist.
                for k in 0..appenders {
                    engine.append(&format!("s{k}"), 1, vec![body.clone()], None).await.unwrap();
                }
                let c0 = cpu_us();
                let t0 = Instant::now();
                let tasks: Vec<_> = (0..appenders)
                    .map(|k| {
                        let engine = engine.clone();
                        let body = body.clone();
                        tokio::spawn(async move {
                            let s = format!("s{k}");
                            for _ in 0..appends / appenders {
                                engine.append(&s, 1, vec![body.clone()], None).await.unwrap();
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await.unwrap();
                }
                let secs = t0.elapsed().as_secs_f64();
                let cpu = cpu_us() - c0;
                let n = (appends / appenders * appenders) as f64;
                println!("{:.0} rec/s {:.2} cpu_us/append", n / secs, cpu / n);
                engine.shutdown().await;
            });
        }
        "count" => {
            let dir = tempfile::tempdir_in(&args[2]).unwrap();
            let appends: usize = args[3].parse().unwrap();
            let engine = Engine::open(dir.path()).unwrap();
            rt.block_on(async {
                for _ in 0..appends {
                    engine.append("s", 1, vec![body.clone()], None).await.unwrap();
                }
                engine.shutdown().await;
            });
        }
        _ => panic!("mode"),
    }
}
