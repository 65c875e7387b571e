//! The cells where a deployment's replicated logs and its data directories disagree (issue
//! 28): the JetStream store wiped under data directories that remember everything, a data
//! directory deleted under an intact log, the log restored from an older copy than the data
//! directories, and the account's permissions changed under the running processes so the logs
//! refuse their appends for a while. Each must end with every turn answered or told.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::cells::Fault;
use crate::deploy::Deployment;
use crate::inject::sleep_supervised;
use crate::nats_server::copy_dir;

/// How long the load runs on between the copy of the log and its restore.
const RUN_ON: Duration = Duration::from_secs(6);
/// How long the logs' subjects stay denied.
const DENIED_FOR: Duration = Duration::from_secs(10);
/// A stopped process is started again after this long.
const DOWN_FOR: Duration = Duration::from_secs(1);
/// The session process whose data directory is deleted.
const LOSES_ITS_DATA: &str = "session-a";

/// Strike `fault` (one of this module's) while the load and a probe run.
pub fn strike(
    dep: &mut Deployment,
    fault: Fault,
    work: &Path,
    extra: &mut Map<String, Value>,
) -> anyhow::Result<()> {
    match fault {
        Fault::LogWiped => {
            dep.stop_all();
            dep.nats.restart_with_store(None);
            dep.start_all()?;
        }
        Fault::DataDirLost => {
            let proc = dep.proc_mut(LOSES_ITS_DATA)?;
            proc.stop();
            let data = proc.data_dir().to_path_buf();
            std::fs::remove_dir_all(&data)?;
            extra.insert("deleted".into(), json!(data.display().to_string()));
            sleep_supervised(dep, DOWN_FOR)?;
            dep.restart(LOSES_ITS_DATA)?;
        }
        Fault::LogRestoredOlder => {
            // A consistent copy of the store: the server is stopped for the moment it takes,
            // as for a file-level backup.
            let backup = work.join("nats-backup");
            dep.nats.stop();
            copy_dir(&dep.nats.store_dir(), &backup);
            dep.nats.restart();
            sleep_supervised(dep, RUN_ON)?;
            dep.stop_all();
            dep.nats.restart_with_store(Some(&backup));
            dep.start_all()?;
        }
        Fault::PermissionsChanged => {
            write_nats_config(work, true)?;
            dep.nats.reload();
            sleep_supervised(dep, DENIED_FOR)?;
            write_nats_config(work, false)?;
            dep.nats.reload();
            extra.insert("denied_secs".into(), json!(DENIED_FOR.as_secs()));
        }
        _ => anyhow::bail!("{fault:?} is not a log-and-cache cell"),
    }
    Ok(())
}

/// The nats-server configuration of the permissions cell: every connection without
/// credentials is user `hermes`, allowed everything — or, with `deny_logs`, everything but
/// publishing to the session and memory logs' subjects. Returns its path.
pub fn write_nats_config(work: &Path, deny_logs: bool) -> anyhow::Result<PathBuf> {
    let deny = if deny_logs {
        r#", deny: ["hermes.slog.>", "hermes.mlog.>"]"#
    } else {
        ""
    };
    let config = format!(
        r#"
authorization {{
  users = [
    {{ user: "hermes", password: "faults", permissions: {{ publish: {{ allow: [">"]{deny} }}, subscribe: {{ allow: [">"] }} }} }}
  ]
}}
no_auth_user: "hermes"
"#
    );
    let path = work.join("nats.conf");
    std::fs::write(&path, config)?;
    Ok(path)
}
