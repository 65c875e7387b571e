//! `[cluster]`: how sessions are shared by several session processes on one NATS
//! deployment (see config/default.toml and `crate::bus::cluster`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ConfigError;
use crate::bus::cluster::ClusterOptions;

/// How sessions are shared by several session processes on one NATS deployment.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// Session partitions; every process of one deployment must use the same number.
    pub partitions: u32,
    /// Seconds without pulling after which a dead owner's partitions move to another process.
    pub failover_secs: u64,
    /// Seconds after which an item an owner has not settled (or reported in progress) is
    /// delivered again — to the new owner, after a failover.
    pub ack_wait_secs: u64,
    /// Copies JetStream keeps of every stream and bucket Hermes creates (3 on a 3-node cluster).
    pub replicas: usize,
    /// Milliseconds a new turn's message waits for the turn's first write to the session log
    /// before it is appended alone (`crate::turn::first_write`); 0 appends it on arrival.
    pub first_write_within_ms: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        let d = ClusterOptions::default();
        Self {
            partitions: d.partitions,
            failover_secs: d.failover.as_secs(),
            ack_wait_secs: d.ack_wait.as_secs(),
            replicas: d.replicas,
            first_write_within_ms: 50,
        }
    }
}

impl ClusterConfig {
    /// How long a new turn's message waits for the turn's first write; `None`: not at all.
    pub fn first_write_within(&self) -> Option<Duration> {
        (self.first_write_within_ms > 0).then(|| Duration::from_millis(self.first_write_within_ms))
    }

    pub fn options(&self) -> ClusterOptions {
        ClusterOptions {
            partitions: self.partitions,
            failover: Duration::from_secs(self.failover_secs),
            ack_wait: Duration::from_secs(self.ack_wait_secs),
            replicas: self.replicas,
        }
    }

    /// Refuse values no deployment can run with.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        if !(1..=4096).contains(&self.partitions) {
            return Err(ConfigError::Invalid {
                key: "cluster.partitions".into(),
                message: format!(
                    "{} is out of range; use 1 to 4096 (16 suits up to a few dozen session processes)",
                    self.partitions
                ),
            });
        }
        if self.first_write_within_ms > 1_000 {
            return Err(ConfigError::Invalid {
                key: "cluster.first_write_within_ms".into(),
                message: format!(
                    "{} ms would keep `accepted` (and a turn's first events) waiting that long; use 0 to 1000 (50 suits most)",
                    self.first_write_within_ms
                ),
            });
        }
        if self.failover_secs == 0 || self.ack_wait_secs == 0 {
            return Err(ConfigError::Invalid {
                key: "cluster.failover_secs / cluster.ack_wait_secs".into(),
                message: "must be at least 1 second".into(),
            });
        }
        Ok(())
    }
}
