//! A single node's backend: its engine, which decides every write itself.

use super::{Backend, BoxFuture, Elsewhere, Pending, SessionWrites, Soon};
use crate::error::ApiError;
use fencelog_engine::{Config, Engine, StreamState, WriteOp};

/// The engine as the API's backend.
#[derive(Clone)]
pub struct EngineBackend {
    engine: Engine,
}

impl EngineBackend {
    /// `engine` behind the seam.
    pub fn new(engine: Engine) -> Self {
        EngineBackend { engine }
    }
}

impl Backend for EngineBackend {
    fn config(&self) -> &Config {
        self.engine.config()
    }

    fn write(&self, op: WriteOp) -> Pending {
        self.engine.write(op).into()
    }

    fn open_session(&self, _stream: &str) -> Result<Box<dyn SessionWrites>, Elsewhere> {
        Ok(Box::new(self.clone()))
    }

    fn read(&self, _stream: &str) -> Soon<'_, Result<Engine, ApiError>> {
        Soon::now(Ok(self.engine.clone()))
    }

    fn list_streams<'a>(
        &'a self,
        prefix: &'a str,
        start_after: Option<&'a str>,
        limit: usize,
    ) -> Soon<'a, Result<Vec<StreamState>, ApiError>> {
        Soon::now(Ok(self.engine.list_streams(prefix, start_after, limit)))
    }

    fn highest_token(&self, stream: &str) -> u64 {
        self.engine.highest_token(stream)
    }

    fn health(&self) -> Result<(), ApiError> {
        super::engine_health(&self.engine)
    }

    fn metrics(&self, http_families: String) -> String {
        http_families + &super::engine_metrics(&self.engine)
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.engine.shutdown())
    }
}

/// An append session's appends go to the writer's queue as they are
/// read, so the writer plans them in that order.
impl SessionWrites for EngineBackend {
    fn append(&self, op: WriteOp) -> Pending {
        self.engine.write(op).into()
    }
}
