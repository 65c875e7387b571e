//! Exporting traces: an OpenTelemetry tracer provider whose batch processor posts spans over
//! OTLP/HTTP (protobuf) to the resolved `[telemetry]` endpoint, and the `tracing` layer that
//! turns Hermes' spans ([`super::spans`]) into OpenTelemetry spans.
//!
//! The batch processor exports from a thread of its own with a blocking HTTP client, so it
//! works the same under the CLI, the actix arbiters and the I/O runtime, and a slow or absent
//! receiver never holds up a turn (spans queue, then drop). [`Exporting::shutdown`] flushes
//! what is queued; call it when the process is about to exit.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use super::export::Reporting;
use super::trace_context;
use crate::config::telemetry::TraceExport;

/// The longest [`Exporting::shutdown`] waits for the last spans to leave.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// Why traces cannot be exported.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error(
        "cannot set up the OTLP trace exporter for {endpoint}: {reason}; set [telemetry] \
         otlp_endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT) to a URL such as http://127.0.0.1:4318 — \
         this run exports no traces"
    )]
    Exporter { endpoint: String, reason: String },
}

/// A running exporter: the tracer provider behind [`Exporting::layer`].
pub struct Exporting {
    provider: SdkTracerProvider,
    endpoint: String,
}

/// Start exporting to `export`'s receiver. `command` (`serve`, `send`, …) is recorded on every
/// span's resource next to the service name, version, instance id and process id.
pub fn start(export: &TraceExport, command: &str) -> Result<Exporting, TelemetryError> {
    let endpoint = export.traces_url.clone().unwrap_or_else(|| {
        "the endpoint of OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT".into()
    });
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary);
    if let Some(url) = &export.traces_url {
        builder = builder.with_endpoint(url.clone());
    }
    let exporter = builder.build().map_err(|e| TelemetryError::Exporter {
        endpoint: endpoint.clone(),
        reason: e.to_string(),
    })?;
    let resource = Resource::builder()
        .with_service_name(export.service_name.clone())
        .with_attributes([
            KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
            KeyValue::new("service.instance.id", uuid::Uuid::new_v4().to_string()),
            KeyValue::new("process.pid", i64::from(std::process::id())),
            KeyValue::new("process.executable.name", "hermes"),
            KeyValue::new("hermes.command", command.to_string()),
        ])
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(Reporting::new(exporter, endpoint.clone()))
        .with_resource(resource)
        .build();
    trace_context::set_enabled(true);
    Ok(Exporting { provider, endpoint })
}

impl Exporting {
    /// Where spans go.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The `tracing` layer that records Hermes' spans (INFO and above, from this crate) as
    /// OpenTelemetry spans, with warnings and errors inside them as span events. Other crates'
    /// spans are left out; the log filter (`HERMES_LOG`) does not apply to it.
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let tracer = self.provider.tracer("hermes");
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            // Entering a span (every poll of a future it instruments) attaches nothing: the
            // context is read from the span when a message leaves.
            .with_context_activation(false)
            .with_tracked_inactivity(false)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_filter(filter_fn(|meta| {
                if meta.is_span() {
                    meta.target().starts_with("hermes") && *meta.level() <= tracing::Level::INFO
                } else {
                    *meta.level() <= tracing::Level::WARN
                }
            }))
    }

    /// Export what is queued (waiting at most a few seconds) and stop.
    pub fn shutdown(self) {
        trace_context::set_enabled(false);
        if let Err(error) = self.provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT) {
            tracing::warn!(
                endpoint = %self.endpoint,
                %error,
                "the last trace spans may not have reached the OTLP receiver"
            );
        }
    }
}
