//! `fencelog dev-cluster`: a three-node cluster on loopback in one
//! command, for trying cluster mode out. Each node is a child
//! `fencelog serve --cluster` of this very binary, with its own data
//! directory and log file under `--data-dir`; Ctrl-C or SIGTERM stops all
//! three (SIGTERM to each child by its PID, then waiting for it).

use clap::Parser;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};

/// Nodes a dev cluster runs.
const NODES: usize = 3;

#[derive(Debug, Parser)]
pub struct Args {
    /// Holds node-1, node-2 and node-3 (data directories) and their logs
    /// (node-N.log); created if missing, reused by the next start.
    #[arg(long)]
    data_dir: PathBuf,
    /// The three nodes' loopback ports.
    #[arg(long, value_delimiter = ',', default_value = "7071,7072,7073")]
    ports: Vec<u16>,
    /// Shards (fixed when the cluster is created).
    #[arg(long, default_value_t = 8)]
    shards: u32,
}

/// Starts node `id` and waits for its `listening on` line.
fn start_node(args: &Args, members: &str, id: usize) -> Result<Child, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let log_path = args.data_dir.join(format!("node-{id}.log"));
    let log = std::fs::File::create(&log_path)
        .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
    let mut child = Command::new(exe)
        .args(["serve", "--node-id", &id.to_string(), "--cluster", members])
        .args(["--shards", &args.shards.to_string(), "--data-dir"])
        .arg(args.data_dir.join(format!("node-{id}")))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start node {id}: {e}"))?;
    let mut line = String::new();
    let out = child.stdout.take().expect("piped");
    let read = BufReader::new(out).read_line(&mut line);
    if !matches!(read, Ok(n) if n > 0 && line.starts_with("listening on")) {
        stop(&mut [child]);
        return Err(format!(
            "node {id} did not start; see {}",
            log_path.display()
        ));
    }
    Ok(child)
}

/// SIGTERM to every child by its PID, then waits for each.
fn stop(children: &mut [Child]) {
    for c in children.iter() {
        let pid = rustix::process::Pid::from_child(c);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    for c in children.iter_mut() {
        let _ = c.wait();
    }
}

pub fn run(args: Args) -> ExitCode {
    // Signals are caught before the first child starts, so a Ctrl-C at any
    // point stops the children instead of orphaning them.
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fencelog dev-cluster: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut interrupts = {
        let _in = rt.enter();
        super::signals::Interrupts::catch()
    };
    if args.ports.len() != NODES {
        eprintln!(
            "fencelog dev-cluster: --ports takes {NODES} ports, got {}",
            args.ports.len()
        );
        return ExitCode::from(2);
    }
    if let Err(e) = std::fs::create_dir_all(&args.data_dir) {
        eprintln!(
            "fencelog dev-cluster: cannot create {}: {e}",
            args.data_dir.display()
        );
        return ExitCode::from(2);
    }
    let members: Vec<String> = (1..=NODES)
        .map(|i| format!("{i}=127.0.0.1:{}", args.ports[i - 1]))
        .collect();
    let members = members.join(",");
    let mut children = Vec::with_capacity(NODES);
    for id in 1..=NODES {
        match start_node(&args, &members, id) {
            Ok(c) => children.push(c),
            Err(e) => {
                eprintln!("fencelog dev-cluster: {e}");
                stop(&mut children);
                return ExitCode::FAILURE;
            }
        }
    }
    for (i, port) in args.ports.iter().enumerate() {
        println!("node {}: http://127.0.0.1:{port}", i + 1);
    }
    println!(
        "try: FENCELOG_URL=http://127.0.0.1:{} fencelog append demo --token 1 hello",
        args.ports[0]
    );
    let _ = std::io::stdout().flush();
    rt.block_on(interrupts.next());
    stop(&mut children);
    ExitCode::SUCCESS
}
