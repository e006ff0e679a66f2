//! A TCP proxy a test controls: it forwards connections to a target until
//! [`TcpProxy::cut`], which closes every open connection and stops
//! listening, so the client side sees resets and then refused connects —
//! a partition between one process and one service, with nothing else on
//! the machine affected.

use std::net::SocketAddr;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct TcpProxy {
    addr: SocketAddr,
    cut: watch::Sender<bool>,
}

impl TcpProxy {
    /// Listens on a free loopback port and forwards to `target`.
    pub async fn start(target: SocketAddr) -> TcpProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (cut, mut cut_seen) = watch::channel(false);
        let forwards = cut_seen.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    a = listener.accept() => a,
                    // Dropping the listener: later connects are refused.
                    _ = cut_seen.wait_for(|c| *c) => return,
                };
                let Ok((mut down, _)) = accepted else {
                    continue;
                };
                let mut cut_seen = forwards.clone();
                tokio::spawn(async move {
                    let Ok(mut up) = TcpStream::connect(target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut down, &mut up) => {}
                        // Both sockets drop here, closing the connection.
                        _ = cut_seen.wait_for(|c| *c) => {}
                    }
                });
            }
        });
        TcpProxy { addr, cut }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Closes every forwarded connection and refuses new ones, for good.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.cut();
    }
}
