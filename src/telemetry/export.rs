//! [`Reporting`]: the OTLP span exporter, saying once (as a warning) when the receiver cannot
//! be reached and once when it answers again — instead of failing silently batch after batch,
//! and without ever failing anything else.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;

/// Wraps an exporter to report its failures in the log.
#[derive(Debug)]
pub struct Reporting<E> {
    inner: E,
    /// Where spans go, for the messages.
    endpoint: String,
    failing: AtomicBool,
}

impl<E> Reporting<E> {
    pub fn new(inner: E, endpoint: String) -> Self {
        Self {
            inner,
            endpoint,
            failing: AtomicBool::new(false),
        }
    }

    /// Log a change between working and failing; true when the export failed.
    fn note(&self, result: &OTelSdkResult, spans: usize) {
        match result {
            Err(error) => {
                if !self.failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        endpoint = %self.endpoint,
                        %error,
                        spans,
                        "cannot send trace spans to the OTLP receiver; they are dropped until it \
                         answers. Check that a collector listens there ([telemetry] \
                         otlp_endpoint, or OTEL_EXPORTER_OTLP_ENDPOINT)"
                    );
                }
            }
            Ok(()) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(endpoint = %self.endpoint, "the OTLP receiver answers again; trace spans are exported");
                }
            }
        }
    }
}

impl<E: SpanExporter> SpanExporter for Reporting<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        self.note(&result, spans);
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
