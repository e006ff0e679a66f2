//! The HTTP layer's metrics, next to the engine's on `GET /metrics`:
//! requests and their latency by route and status, what reads returned,
//! and live tails. Labels are the route (a path of the route table,
//! which the router's middleware finds for each request: never the raw
//! URI), the method and the status, so their number is bounded by the
//! API itself.

use axum::http::Method;
use fencelog_engine::Record;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::borrow::Cow;
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// The route label of a request no route matched (a 404 or 405 from the
/// router): one label for all of them, whatever path was asked for.
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// Borrowed where the label is one of a fixed set (the route table's paths,
/// the standard methods), so counting a request allocates nothing.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: Cow<'static, str>,
    route: &'static str,
    status: u16,
}

/// The method's label: borrowed for the standard methods.
pub(crate) fn method_label(method: &Method) -> Cow<'static, str> {
    // `Method::as_str` of a standard method is a static string, but its
    // signature ties it to the method.
    Cow::Borrowed(match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        _ => return Cow::Owned(method.as_str().to_string()),
    })
}

type LatencyFamily = Family<RequestLabels, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 100 µs .. ~6.5 s; a long-poll or a tail's first answer can take long.
    Histogram::new(exponential_buckets(0.000_1, 2.0, 17))
}

/// The HTTP layer's metrics; cheap to share (`Arc` in
/// [`AppState`](crate::state::AppState)).
pub struct HttpMetrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_seconds: LatencyFamily,
    read_records: Counter,
    read_bytes: Counter,
    tails_live: Gauge<i64, AtomicI64>,
    tail_events: Counter,
    tail_records: Counter,
    /// The append route's series for its two usual answers, 200 and 409,
    /// looked up once: a flood of appends or of stale writers then counts
    /// each answer without hashing its labels twice under the families'
    /// locks (~1k instructions a request, callgrind). The handles share
    /// the families' cells, so `/metrics` shows the same numbers.
    append_series: [OnceLock<(Counter, Histogram)>; APPEND_CACHED_STATUSES.len()],
}

/// The append route's answers whose series [`HttpMetrics::answered_append`]
/// keeps handles to.
const APPEND_CACHED_STATUSES: [u16; 2] = [200, 409];

impl Default for HttpMetrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("fencelog");
        let m = HttpMetrics {
            registry: Registry::default(),
            requests: Family::default(),
            request_seconds: LatencyFamily::new_with_constructor(latency_histogram),
            read_records: Counter::default(),
            read_bytes: Counter::default(),
            tails_live: Gauge::default(),
            tail_events: Counter::default(),
            tail_records: Counter::default(),
            append_series: Default::default(),
        };
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, route and status",
            m.requests.clone(),
        );
        registry.register(
            "http_request_seconds",
            "time to the response head, by method, route and status \
             (a live tail's events continue after it)",
            m.request_seconds.clone(),
        );
        registry.register(
            "read_records",
            "records returned by plain reads and long-polls",
            m.read_records.clone(),
        );
        registry.register(
            "read_bytes",
            "record body bytes returned by plain reads and long-polls",
            m.read_bytes.clone(),
        );
        registry.register(
            "tails_live",
            "live tails (SSE) open now",
            m.tails_live.clone(),
        );
        registry.register(
            "tail_events",
            "records events sent to live tails",
            m.tail_events.clone(),
        );
        registry.register(
            "tail_records",
            "records sent to live tails",
            m.tail_records.clone(),
        );
        HttpMetrics { registry, ..m }
    }
}

impl HttpMetrics {
    /// One plain read's page.
    pub(crate) fn read(&self, records: &[Record]) {
        self.read_records.inc_by(records.len() as u64);
        self.read_bytes
            .inc_by(records.iter().map(|r| r.body.len() as u64).sum());
    }

    /// One `records` event sent to a live tail.
    pub(crate) fn tail_event(&self, records: &[Record]) {
        self.tail_events.inc();
        self.tail_records.inc_by(records.len() as u64);
    }

    /// Counts a live tail as open until the guard is dropped (the tail's
    /// stream ends or its client goes away).
    pub(crate) fn tail_opened(self: &Arc<Self>) -> TailGuard {
        self.tails_live.inc();
        TailGuard(self.clone())
    }

    /// The OpenMetrics text of these metrics, without the final `# EOF`
    /// (the backend's text, which `GET /metrics` puts after, has it).
    pub fn encode_without_eof(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        match out.strip_suffix("# EOF\n") {
            Some(body) => body.to_string(),
            None => out,
        }
    }
}

/// See [`HttpMetrics::tail_opened`].
pub struct TailGuard(Arc<HttpMetrics>);

impl Drop for TailGuard {
    fn drop(&mut self) {
        self.0.tails_live.dec();
    }
}

/// The append route's label, for the fast path in front of the router
/// (`crate::routes::append_route`), which counts its answers under the same
/// series the router's would be.
pub const APPEND_ROUTE: &str = "/v1/streams/{stream}/records";

impl HttpMetrics {
    /// One answered request: counted, and timed from `started` to now.
    pub(crate) fn answered(
        &self,
        method: Cow<'static, str>,
        route: &'static str,
        status: u16,
        started: Instant,
    ) {
        let labels = RequestLabels {
            method,
            route,
            status,
        };
        self.requests.get_or_create(&labels).inc();
        self.request_seconds
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
    }

    /// [`HttpMetrics::answered`] for the append route (`POST`
    /// [`APPEND_ROUTE`]), through the kept handles where there are some.
    pub(crate) fn answered_append(&self, status: u16, started: Instant) {
        let Some(at) = APPEND_CACHED_STATUSES.iter().position(|&s| s == status) else {
            return self.answered(Cow::Borrowed("POST"), APPEND_ROUTE, status, started);
        };
        let (requests, seconds) = self.append_series[at].get_or_init(|| {
            let labels = RequestLabels {
                method: Cow::Borrowed("POST"),
                route: APPEND_ROUTE,
                status,
            };
            (
                self.requests.get_or_create(&labels).clone(),
                self.request_seconds.get_or_create(&labels).clone(),
            )
        });
        requests.inc();
        seconds.observe(started.elapsed().as_secs_f64());
    }
}
