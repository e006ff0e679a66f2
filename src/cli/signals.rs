//! Ctrl-C (SIGINT) and SIGTERM for the client commands that run until
//! told to stop (`tail`) or that must report what they did when stopped
//! (`append -`). Installed only by those, so every other command keeps the
//! default of dying at once.

use tokio::signal::unix::{signal, Signal, SignalKind};

/// Every SIGINT and SIGTERM from now on, one at a time.
pub struct Interrupts {
    int: Option<Signal>,
    term: Option<Signal>,
}

impl Interrupts {
    /// Starts catching both signals. One that cannot be caught keeps its
    /// default action (the process dies), which is what it did before.
    pub fn catch() -> Interrupts {
        Interrupts {
            int: signal(SignalKind::interrupt()).ok(),
            term: signal(SignalKind::terminate()).ok(),
        }
    }

    /// The next signal.
    pub async fn next(&mut self) {
        async fn recv(s: &mut Option<Signal>) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            _ = recv(&mut self.int) => {}
            _ = recv(&mut self.term) => {}
        }
    }
}
