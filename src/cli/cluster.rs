//! `fencelog cluster status|add|remove|transfer`: the admin API
//! of any node of a cluster. `--json` prints the node's JSON answer as one
//! line; errors are reported like every client command's (exit 1 when
//! unavailable or not done in time, 4 when refused).

use super::common::{self, ServerArgs, EXIT_OK};
use clap::{Args as ClapArgs, Subcommand};
use serde_json::Value;
use std::process::ExitCode;

#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    pub command: ClusterCommand,
}

/// What every cluster command takes.
#[derive(Debug, ClapArgs)]
pub struct Common {
    /// Print the node's JSON answer on one line.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Every shard as the node sees it: leader, term, voters, learners,
    /// applied index, preferred leader, and on the shards it leads when a
    /// majority last answered it; and the shards each node leads.
    Status {
        #[command(flatten)]
        common: Common,
    },
    /// Add a node started with `fencelog serve --node-id ID --join ...`:
    /// a learner of every shard, caught up, then a voter.
    Add {
        /// The new node's id.
        node_id: u64,
        /// Its address (HOST:PORT), as the other nodes reach it.
        addr: String,
        #[command(flatten)]
        common: Common,
    },
    /// Remove a node from every shard (its leaderships move first).
    Remove {
        /// The node's id.
        node_id: u64,
        #[command(flatten)]
        common: Common,
    },
    /// Move a shard's leadership to a node (a voter of the shard).
    Transfer {
        /// The shard.
        shard: u32,
        /// The node to lead it.
        node_id: u64,
        #[command(flatten)]
        common: Common,
    },
}

impl ClusterCommand {
    fn common(&self) -> &Common {
        match self {
            ClusterCommand::Status { common }
            | ClusterCommand::Add { common, .. }
            | ClusterCommand::Remove { common, .. }
            | ClusterCommand::Transfer { common, .. } => common,
        }
    }
}

pub fn run(args: Args) -> ExitCode {
    let Common { json, server } = args.command.common();
    let client = match server.client() {
        Ok(c) => c,
        Err(e) => return common::fail(&e, *json),
    };
    let answer = common::block_on(async {
        match &args.command {
            ClusterCommand::Status { .. } => client.cluster_status().await,
            ClusterCommand::Add { node_id, addr, .. } => client.cluster_add(*node_id, addr).await,
            ClusterCommand::Remove { node_id, .. } => client.cluster_remove(*node_id).await,
            ClusterCommand::Transfer { shard, node_id, .. } => {
                client.cluster_transfer(*shard, *node_id).await
            }
        }
    });
    let v = match answer {
        Ok(v) => v,
        Err(e) => return common::fail(&e, *json),
    };
    if *json {
        println!("{v}");
    } else {
        print!("{}", text(&args.command, &v));
    }
    ExitCode::from(EXIT_OK)
}

/// `[1,2]` as `1,2`; empty or absent as `-`.
fn ids(v: &Value) -> String {
    let ids: Vec<String> = v
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| i.to_string())
        .collect();
    if ids.is_empty() {
        "-".into()
    } else {
        ids.join(",")
    }
}

fn or_dash(v: &Value) -> String {
    if v.is_null() {
        "-".into()
    } else {
        v.to_string().trim_matches('"').to_string()
    }
}

/// The human-readable answer, lines ending in newlines.
pub fn text(command: &ClusterCommand, v: &Value) -> String {
    match command {
        ClusterCommand::Status { .. } => status_text(v),
        ClusterCommand::Add { .. } => format!(
            "node {} ({}) is a voter of shards {}\n",
            v["node_id"],
            or_dash(&v["addr"]),
            ids(&v["voter_of"])
        ),
        ClusterCommand::Remove { .. } => format!(
            "node {} is removed from shards {}\n",
            v["node_id"],
            ids(&v["removed_from"])
        ),
        ClusterCommand::Transfer { .. } => {
            format!("shard {} is led by node {}\n", v["shard"], v["leader"])
        }
    }
}

/// `cluster status`: a header, one line per shard, the leaders per node.
pub fn status_text(v: &Value) -> String {
    let health = if v["healthy"] == true {
        "healthy"
    } else {
        "UNHEALTHY"
    };
    let mut out = format!("node {} ({health})\n", v["node_id"]);
    out.push_str(
        "shard  state      leader  preferred  term  voters    learners  applied    quorum ack\n",
    );
    for s in v["shards"].as_array().into_iter().flatten() {
        // A leader's last majority answer: seconds ago means it is cut off.
        let acked = match s["quorum_ack_ms"].as_u64() {
            Some(ms) => format!("{ms} ms ago"),
            None => "-".to_string(),
        };
        out.push_str(&format!(
            "{:<6} {:<10} {:<7} {:<10} {:<5} {:<9} {:<9} {:<10} {acked}\n",
            or_dash(&s["shard"]),
            or_dash(&s["state"]),
            or_dash(&s["leader"]),
            or_dash(&s["preferred_leader"]),
            or_dash(&s["term"]),
            ids(&s["voters"]),
            ids(&s["learners"]),
            or_dash(&s["applied_index"]),
        ));
    }
    let leaders: Vec<String> = v["leaders"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(node, shards)| format!("node {node}: {}", ids(shards)))
        .collect();
    out.push_str(&format!("leaders: {}\n", leaders.join("; ")));
    out
}
