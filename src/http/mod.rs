//! The HTTP API (axum). (Being written; see issue 3.)
