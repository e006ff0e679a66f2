//! `fencelog serve --node-id N --cluster 1=HOST:PORT,...`: one node of a
//! replicated cluster. The same HTTP API, limits, tokens and memory budget
//! as a single node, over the cluster's backend, plus the Raft RPCs and
//! the admin routes under `/_cluster/` on the same port.

use super::serve::{report_dropped_log_lines, stop_signal, Args, FileSettings, Prepared, Settings};
use super::server_log::ServerLog;
use fencelog_cluster::backend::ClusterBackend;
use fencelog_cluster::http_auth::ClusterAuth;
use fencelog_cluster::node::{Node, NodeOptions, Timing};
use fencelog_cluster::peer::{HttpTransport, PeerRpc, PeerTls};
use fencelog_cluster::shard::{SHARDS_DEFAULT, SHARDS_MAX};
use fencelog_server::auth::Auth;
use fencelog_server::server::serve_with;
use fencelog_server::state::AppState;
use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Most members `--cluster` may name.
const MEMBERS_MAX: usize = 64;
/// The rebalancer's interval when not configured.
const REBALANCE_MS_DEFAULT: u64 = 3000;
/// How often shard leaders propose retention trims when not configured:
/// a single node's reclaimer interval.
const RETENTION_INTERVAL_MS_DEFAULT: u64 = fencelog_engine::config::RECLAIM_INTERVAL_MS_DEFAULT;
/// How long `--join` waits for the node it joins through to answer.
const JOIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The cluster part of the settings.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ClusterSettings {
    pub node_id: u64,
    /// As given: `ID=HOST:PORT,...` (empty when joining).
    pub cluster: String,
    /// A running cluster's node to join through.
    pub join: Option<String>,
    /// 307 instead of forwarding.
    pub cluster_redirect: bool,
    /// How the Raft RPCs go to the other nodes.
    pub peer_rpc: PeerRpc,
    /// The rebalancer's interval; 0 = off.
    pub rebalance_ms: u64,
    /// How often shard leaders propose retention trims; 0 = off.
    pub retention_interval_ms: u64,
    /// A snapshot every this many applied entries.
    pub raft_snapshot_logs: u64,
    #[serde(skip)]
    pub members: BTreeMap<u64, String>,
    pub listen: String,
    pub shards: u32,
    pub raft_heartbeat_ms: u64,
    pub raft_election_ms: String,
    pub commit_timeout_ms: u64,
    #[serde(skip)]
    pub election: (u64, u64),
    /// Where the peer secret is read from (never printed).
    pub cluster_secret_file: Option<std::path::PathBuf>,
    /// The CA of the nodes' certificates, when they serve TLS.
    pub cluster_ca_cert: Option<std::path::PathBuf>,
    /// Whether `shards` was given (a joining node checks it).
    #[serde(skip)]
    pub shards_given: bool,
}

/// `1=a:1,2=b:2` as a member map.
fn parse_members(text: &str) -> Result<BTreeMap<u64, String>, String> {
    let mut members = BTreeMap::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (id, addr) = part
            .split_once('=')
            .ok_or(format!("cluster: {part:?} is not ID=HOST:PORT"))?;
        let id: u64 = id
            .parse()
            .map_err(|_| format!("cluster: {id:?} is not a node id"))?;
        if id == 0 || addr.is_empty() || members.insert(id, addr.to_string()).is_some() {
            return Err(format!("cluster: bad or repeated member {part:?}"));
        }
    }
    if members.is_empty() || members.len() > MEMBERS_MAX {
        return Err(format!(
            "cluster: 1..={MEMBERS_MAX} members, got {}",
            members.len()
        ));
    }
    Ok(members)
}

/// Fewer entries between snapshots than this would snapshot constantly.
const SNAPSHOT_LOGS_MIN: u64 = 10;

fn snapshot_logs(given: Option<u64>) -> Result<u64, String> {
    match given {
        None => Ok(Timing::DEFAULT.snapshot_logs),
        Some(n) if n >= SNAPSHOT_LOGS_MIN => Ok(n),
        Some(n) => Err(format!(
            "raft_snapshot_logs must be at least {SNAPSHOT_LOGS_MIN}, got {n}"
        )),
    }
}

fn parse_range(text: &str) -> Result<(u64, u64), String> {
    let bad = || format!("raft_election_ms: {text:?} is not MIN-MAX");
    let (a, b) = text.split_once('-').ok_or_else(bad)?;
    let (a, b) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    if a == 0 || a >= b {
        return Err(bad());
    }
    Ok((a, b))
}

/// The `cluster` text and the members it names.
type ClusterMembers = (String, BTreeMap<u64, String>);

/// The `cluster` text and its members, empty for a joining node; `None`
/// for a single node (which must not name a node id).
fn cluster_or_join(
    cluster: Option<String>,
    join: Option<&String>,
    node_id_given: bool,
) -> Result<Option<ClusterMembers>, String> {
    match (cluster, join) {
        (Some(_), Some(_)) => {
            Err("cluster and join exclude each other: cluster creates a cluster, join joins a running one".into())
        }
        (Some(c), None) => {
            let members = parse_members(&c)?;
            Ok(Some((c, members)))
        }
        (None, Some(_)) => Ok(Some((String::new(), BTreeMap::new()))),
        (None, None) if node_id_given => Err("node_id needs cluster or join".into()),
        (None, None) => Ok(None),
    }
}

/// The address this node serves at: `listen` if given, else its own entry
/// in the members; a node that creates the cluster must be one of them.
fn own_listen(
    node_id: u64,
    members: &BTreeMap<u64, String>,
    listen: Option<String>,
    joining: bool,
) -> Result<String, String> {
    let listen = match (members.get(&node_id), listen) {
        (_, Some(l)) => l,
        (Some(own), None) => own.clone(),
        (None, None) if joining => {
            return Err("join needs listen: the address the other nodes reach this node at".into())
        }
        (None, None) => return Err(format!("node_id {node_id} is not in cluster")),
    };
    if !joining && !members.contains_key(&node_id) {
        return Err(format!("node_id {node_id} is not in cluster"));
    }
    Ok(listen)
}

impl ClusterSettings {
    /// Flags and environment over the file; `None` without `--cluster`.
    pub(super) fn resolve(args: &Args, file: &FileSettings) -> Result<Option<Self>, String> {
        let join = args.join.clone().or(file.join.clone());
        let cluster = args.cluster.clone().or(file.cluster.clone());
        let node_id = args.node_id.or(file.node_id);
        let Some((cluster, members)) = cluster_or_join(cluster, join.as_ref(), node_id.is_some())?
        else {
            return Ok(None);
        };
        let node_id = node_id.ok_or("cluster and join need node_id")?;
        let listen = args.listen.clone().or(file.listen.clone());
        let listen = own_listen(node_id, &members, listen, join.is_some())?;
        let shards = args.shards.or(file.shards).unwrap_or(SHARDS_DEFAULT);
        if !(1..=SHARDS_MAX).contains(&shards) {
            return Err(format!("shards must be in 1..={SHARDS_MAX}, got {shards}"));
        }
        let d = Timing::DEFAULT;
        let raft_election_ms = args
            .raft_election_ms
            .clone()
            .or(file.raft_election_ms.clone())
            .unwrap_or(format!("{}-{}", d.election_min_ms, d.election_max_ms));
        Ok(Some(ClusterSettings {
            node_id,
            listen,
            members,
            cluster,
            join,
            cluster_redirect: args.cluster_redirect || file.cluster_redirect.unwrap_or(false),
            peer_rpc: match (args.peer_rpc, &file.peer_rpc) {
                (Some(p), _) => p,
                (None, Some(text)) => text.parse()?,
                (None, None) => PeerRpc::default(),
            },
            rebalance_ms: args
                .rebalance_ms
                .or(file.rebalance_ms)
                .unwrap_or(REBALANCE_MS_DEFAULT),
            retention_interval_ms: args
                .retention_interval_ms
                .or(file.retention_interval_ms)
                .unwrap_or(RETENTION_INTERVAL_MS_DEFAULT),
            raft_snapshot_logs: snapshot_logs(args.raft_snapshot_logs.or(file.raft_snapshot_logs))?,
            shards,
            raft_heartbeat_ms: args
                .raft_heartbeat_ms
                .or(file.raft_heartbeat_ms)
                .unwrap_or(d.heartbeat_ms),
            election: parse_range(&raft_election_ms)?,
            commit_timeout_ms: args
                .commit_timeout_ms
                .or(file.commit_timeout_ms)
                .unwrap_or(10_000)
                .max(1),
            raft_election_ms,
            cluster_secret_file: args
                .cluster_secret_file
                .clone()
                .or(file.cluster_secret_file.clone()),
            cluster_ca_cert: args
                .cluster_ca_cert
                .clone()
                .or(file.cluster_ca_cert.clone()),
            shards_given: args.shards.or(file.shards).is_some(),
        }))
    }

    fn options(&self, settings: &Settings, p: &Prepared, shards: u32) -> NodeOptions {
        let timing = Timing {
            heartbeat_ms: self.raft_heartbeat_ms,
            election_min_ms: self.election.0,
            election_max_ms: self.election.1,
            snapshot_logs: self.raft_snapshot_logs,
            keep_logs: (self.raft_snapshot_logs / 4).min(Timing::DEFAULT.keep_logs),
            purge_batch: (self.raft_snapshot_logs / 8).clamp(1, Timing::DEFAULT.purge_batch),
            // As the defaults: four intervals (see `snapshot_trigger`).
            snapshot_hold_logs: self.raft_snapshot_logs.saturating_mul(4),
            snapshot_hold_bytes: Timing::DEFAULT.snapshot_hold_bytes,
            append_rpc_bytes_max: Timing::DEFAULT.append_rpc_bytes_max,
        };
        NodeOptions {
            id: self.node_id,
            members: self.members.clone(),
            shards,
            data_dir: settings.data_dir.clone(),
            engine: p.config.clone(),
            timing,
            commit_timeout: Duration::from_millis(self.commit_timeout_ms),
            redirect: self.cluster_redirect,
            rebalance: (self.rebalance_ms > 0).then(|| Duration::from_millis(self.rebalance_ms)),
            retention: (self.retention_interval_ms > 0)
                .then(|| Duration::from_millis(self.retention_interval_ms)),
        }
    }
}

impl ClusterSettings {
    /// The node's client tokens and peer secret, checked: tokens need a
    /// secret, and a secret file must be readable and long enough.
    fn access(&self, auth: &Auth) -> Result<(ClusterAuth, Option<String>), String> {
        let secret = match &self.cluster_secret_file {
            None => None,
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| format!("cluster_secret_file {}: {e}", path.display()))?,
            ),
        };
        let access = ClusterAuth::new(auth.clone(), secret.as_deref())?;
        Ok((access, secret))
    }

    /// The node's transport to the others: the peer secret, and https
    /// when this node serves TLS (the nodes of a cluster all do or none
    /// do: a peer's client port is where its Raft RPCs go).
    fn transport(
        &self,
        settings: &Settings,
        secret: Option<String>,
    ) -> Result<HttpTransport, String> {
        if settings.tls_cert.is_none() {
            if self.cluster_ca_cert.is_some() {
                return Err("cluster_ca_cert needs tls_cert: the nodes serve plain HTTP".into());
            }
            return HttpTransport::configured(secret, None).map(|t| t.peer_rpc(self.peer_rpc));
        }
        let ca_pem = match &self.cluster_ca_cert {
            None => None,
            Some(path) => Some(
                std::fs::read(path)
                    .map_err(|e| format!("cluster_ca_cert {}: {e}", path.display()))?,
            ),
        };
        HttpTransport::configured(secret, Some(&PeerTls { ca_pem }))
            .map(|t| t.peer_rpc(self.peer_rpc))
            .map_err(|e| format!("cluster_ca_cert: {e}"))
    }
}

/// Starts the node and serves it until SIGTERM or Ctrl-C.
pub(super) fn open_and_serve(
    settings: &Settings,
    c: &ClusterSettings,
    p: Prepared,
    log: &ServerLog,
) -> ExitCode {
    let access = match c.access(&p.auth) {
        Ok(a) => a,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(serve(settings, c, p, access, log.clone()));
    drop(runtime);
    code
}

async fn serve(
    settings: &Settings,
    c: &ClusterSettings,
    p: Prepared,
    (access, secret): (ClusterAuth, Option<String>),
    log: ServerLog,
) -> ExitCode {
    tokio::spawn(report_dropped_log_lines(log.clone()));
    let listener = match tokio::net::TcpListener::bind(&c.listen).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(listen = %c.listen, error = %e, "cannot listen");
            return ExitCode::FAILURE;
        }
    };
    let transport = match c.transport(settings, secret) {
        Ok(t) => Arc::new(t),
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::from(2);
        }
    };
    let shards = match shard_count(settings, c, &transport).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the cluster node");
            return ExitCode::FAILURE;
        }
    };
    let options = c.options(settings, &p, shards);
    let node = match Node::start(options, transport).await {
        Ok(n) => Arc::new(n),
        Err(e) => {
            tracing::error!(data_dir = %settings.data_dir.display(), error = %e, "cannot start the cluster node");
            return ExitCode::FAILURE;
        }
    };
    let stop = match stop_signal(log.clone()) {
        Ok(stop) => stop,
        Err(e) => {
            tracing::error!(error = %e, "cannot watch SIGTERM and SIGINT");
            return ExitCode::FAILURE;
        }
    };
    let state = AppState::with_backend(Arc::new(ClusterBackend::new(node.clone())))
        .with_limits(p.state_limits)
        .with_auth(p.auth)
        .with_budget(p.budget);
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    fencelog_cluster::admin::spawn_rebalancer(&node);
    fencelog_cluster::retention::spawn(&node);
    tracing::info!(%addr, node_id = c.node_id, shards, "serving as a cluster node");
    // Whoever acts on `listening on` finds the startup lines in the log.
    log.sync();
    log.set_lossy(true);
    println!("listening on {addr}");
    let _ = std::io::stdout().flush();
    let routes = move |shutdown| fencelog_cluster::routes::routes(node, access, shutdown);
    let served = serve_with(listener, state, routes, p.server_config, stop).await;
    match served {
        Ok(()) => {
            tracing::info!("stopped; every shard engine and the Raft WAL are shut down");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!(error = %e, "server failed");
            ExitCode::FAILURE
        }
    }
}

/// The shard count: `--shards` when creating a cluster; when joining, see
/// [`fencelog_cluster::admin::joining_shard_count`].
async fn shard_count(
    settings: &Settings,
    c: &ClusterSettings,
    transport: &HttpTransport,
) -> Result<u32, String> {
    let Some(join) = &c.join else {
        return Ok(c.shards);
    };
    let given = c.shards_given.then_some(c.shards);
    let dir = &settings.data_dir;
    fencelog_cluster::admin::joining_shard_count(dir, join, given, JOIN_TIMEOUT, transport).await
}
