//! `[telemetry]`: where this process sends its trace spans (OTLP over HTTP) and under which
//! service name. Resolved against the standard `OTEL_*` environment variables by
//! [`TelemetryConfig::resolve`]; the exporter itself lives in [`crate::telemetry::otel`].

use serde::{Deserialize, Serialize};

/// `[telemetry]` as written in a config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// Base URL of an OTLP/HTTP receiver (a collector, Jaeger, Tempo…), e.g.
    /// `http://127.0.0.1:4318`; spans are posted to `<base>/v1/traces` as protobuf. A URL that
    /// already ends in `/v1/traces` is used as it is. Unset: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
    /// or `OTEL_EXPORTER_OTLP_ENDPOINT` from the environment, else no export.
    pub otlp_endpoint: Option<String>,
    /// The `service.name` of this process's spans. Unset: `OTEL_SERVICE_NAME`, else `hermes`.
    pub service_name: Option<String>,
}

/// Where spans go, once config and environment are combined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceExport {
    /// The full URL spans are posted to; `None` lets the exporter read
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT` itself (as the
    /// OpenTelemetry specification words them).
    pub traces_url: Option<String>,
    /// The `service.name` resource attribute.
    pub service_name: String,
}

/// The OTLP/HTTP path of the traces signal.
const TRACES_PATH: &str = "/v1/traces";

impl TelemetryConfig {
    /// Whether and where to export, given the environment `env` (a lookup of variable names,
    /// `std::env::var` in production). `OTEL_SDK_DISABLED=true` turns export off whatever the
    /// file says.
    pub fn resolve(&self, env: impl Fn(&str) -> Option<String>) -> Option<TraceExport> {
        let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return None;
        }
        let traces_url = match self.otlp_endpoint.as_deref().map(str::trim) {
            Some(base) if !base.is_empty() => Some(traces_url(base)),
            _ if set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
                || set("OTEL_EXPORTER_OTLP_ENDPOINT").is_some() =>
            {
                None
            }
            _ => return None,
        };
        let service_name = self
            .service_name
            .clone()
            .filter(|s| !s.trim().is_empty())
            .or_else(|| set("OTEL_SERVICE_NAME"))
            .unwrap_or_else(|| "hermes".to_string());
        Some(TraceExport {
            traces_url,
            service_name,
        })
    }
}

/// `<base>/v1/traces`, unless `base` already names the traces path.
fn traces_url(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with(TRACES_PATH) {
        base.to_string()
    } else {
        format!("{base}{TRACES_PATH}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.get(name).cloned()
    }

    #[test]
    fn nothing_configured_exports_nothing() {
        assert_eq!(TelemetryConfig::default().resolve(env(&[])), None);
    }

    #[test]
    fn the_file_endpoint_is_a_base_url_and_gets_the_traces_path() {
        let config = TelemetryConfig {
            otlp_endpoint: Some("http://127.0.0.1:4318/".into()),
            service_name: Some("front".into()),
        };
        let export = config.resolve(env(&[("OTEL_SERVICE_NAME", "ignored")]));
        assert_eq!(
            export,
            Some(TraceExport {
                traces_url: Some("http://127.0.0.1:4318/v1/traces".into()),
                service_name: "front".into(),
            })
        );
        let full = TelemetryConfig {
            otlp_endpoint: Some("http://collector/v1/traces".into()),
            service_name: None,
        };
        let export = full.resolve(env(&[])).unwrap();
        assert_eq!(
            export.traces_url.as_deref(),
            Some("http://collector/v1/traces")
        );
        assert_eq!(export.service_name, "hermes");
    }

    #[test]
    fn the_standard_environment_turns_export_on_and_names_the_service() {
        let export = TelemetryConfig::default()
            .resolve(env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_SERVICE_NAME", "tools"),
            ]))
            .unwrap();
        assert_eq!(export.traces_url, None, "the exporter reads the variable");
        assert_eq!(export.service_name, "tools");
    }

    #[test]
    fn otel_sdk_disabled_wins() {
        let config = TelemetryConfig {
            otlp_endpoint: Some("http://c:4318".into()),
            service_name: None,
        };
        assert_eq!(config.resolve(env(&[("OTEL_SDK_DISABLED", "true")])), None);
    }
}
